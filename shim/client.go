// One HTTP/1.1 request over a Unix socket, written by hand: net/http would add megabytes to a
// binary that sends one request per process. The deadline is on the connection (dial and the
// whole exchange), so no request waits past its bound whatever stewardd does.

package main

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// reply is stewardd's answer. protocol is its PROTOCOL_HEADER; hasProtocol false when it sent none.
type reply struct {
	status      int
	body        []byte
	protocol    string
	hasProtocol bool
}

// unreachableError: stewardd could not be reached, or did not answer in full within the bound.
type unreachableError struct {
	reason  string
	timeout bool
}

func (e *unreachableError) Error() string { return e.reason }

// badAnswerError: stewardd answered, but not with a usable HTTP answer.
type badAnswerError struct{ reason string }

func (e *badAnswerError) Error() string { return e.reason }

// sender sends one request; its error, when it has one, is an *unreachableError.
type sender func(socket, route string, body []byte, timeout time.Duration, headers [][2]string) (reply, error)

// postUnix is the real sender.
func postUnix(socket, route string, body []byte, timeout time.Duration, headers [][2]string) (reply, error) {
	deadline := time.Now().Add(timeout)
	conn, err := net.DialTimeout("unix", socket, timeout)
	if err != nil {
		return reply{}, unreachable(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(deadline); err != nil {
		return reply{}, unreachable(err)
	}
	head := make([]byte, 0, 256)
	head = append(head, "POST "+route+" HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: "...)
	head = strconv.AppendInt(head, int64(len(body)), 10)
	head = append(head, "\r\nConnection: close\r\n"...)
	// Hint values are percent-encoded: no CR or LF can reach the head.
	for _, h := range headers {
		head = append(head, h[0]+": "+h[1]+"\r\n"...)
	}
	head = append(head, "\r\n"...)
	// One write (net.Buffers is writev): no half-close, stewardd answers and closes.
	bufs := net.Buffers{head, body}
	_, werr := bufs.WriteTo(conn)
	// Read the answer even when the write failed: stewardd may have answered (a refusal) and
	// closed before reading all of the body.
	raw, rerr := io.ReadAll(io.LimitReader(conn, maxAnswerBytes+1))
	if rerr != nil {
		return reply{}, unreachable(rerr)
	}
	if len(raw) > maxAnswerBytes {
		return reply{}, &badAnswerError{reason: "the answer is longer than " + strconv.Itoa(maxAnswerBytes) + " bytes"}
	}
	r, perr := parseResponse(raw)
	if perr != nil {
		if werr != nil {
			return reply{}, unreachable(werr)
		}
		return reply{}, &unreachableError{reason: perr.Error()}
	}
	return r, nil
}

// unreachable names a socket error by its errno (ECONNREFUSED, ENOENT…), as Node names it.
func unreachable(err error) *unreachableError {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return &unreachableError{reason: "timed out", timeout: true}
	}
	// Before net.Error's Timeout(): an errno says EAGAIN (a full listen backlog) is a timeout.
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if name := errnoName(errno); name != "" {
			return &unreachableError{reason: name}
		}
		return &unreachableError{reason: errno.Error()}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &unreachableError{reason: "timed out", timeout: true}
	}
	return &unreachableError{reason: err.Error()}
}

func errnoName(e syscall.Errno) string {
	switch e {
	case syscall.ENOENT:
		return "ENOENT"
	case syscall.ECONNREFUSED:
		return "ECONNREFUSED"
	case syscall.EACCES:
		return "EACCES"
	case syscall.EPERM:
		return "EPERM"
	case syscall.EAGAIN:
		return "EAGAIN"
	case syscall.ECONNRESET:
		return "ECONNRESET"
	case syscall.EPIPE:
		return "EPIPE"
	case syscall.ENOTDIR:
		return "ENOTDIR"
	case syscall.ELOOP:
		return "ELOOP"
	case syscall.ENAMETOOLONG:
		return "ENAMETOOLONG"
	case syscall.ENOTSOCK:
		return "ENOTSOCK"
	case syscall.EPROTOTYPE:
		return "EPROTOTYPE"
	case syscall.ETIMEDOUT:
		return "ETIMEDOUT"
	case syscall.EMFILE:
		return "EMFILE"
	case syscall.ENFILE:
		return "ENFILE"
	case syscall.ENOBUFS:
		return "ENOBUFS"
	case syscall.ENOMEM:
		return "ENOMEM"
	case syscall.EINVAL:
		return "EINVAL"
	}
	return ""
}

// parseResponse reads a complete HTTP/1.1 answer; an error when it is not (cut off, malformed):
// an answer cut off (stewardd died while writing it) is no answer, never printed in part.
func parseResponse(raw []byte) (reply, error) {
	end := bytes.Index(raw, []byte("\r\n\r\n"))
	if end < 0 {
		return reply{}, errors.New("connection closed before a complete HTTP response")
	}
	head := raw[:end]
	if len(head) < 12 || !bytes.HasPrefix(head, []byte("HTTP/1.")) || (head[7] != '0' && head[7] != '1') ||
		head[8] != ' ' || !isDigit(head[9]) || !isDigit(head[10]) || !isDigit(head[11]) {
		return reply{}, errors.New("malformed HTTP status line")
	}
	r := reply{status: int(head[9]-'0')*100 + int(head[10]-'0')*10 + int(head[11]-'0')}
	body := raw[end+4:]
	if v, ok := headerAfterSpace(head, "content-length:"); ok && len(v) > 0 && isDigit(v[0]) {
		n := 0
		digits := 0
		for digits < len(v) && isDigit(v[digits]) {
			if n < 1<<40 {
				n = n*10 + int(v[digits]-'0')
			}
			digits++
		}
		if len(body) < n {
			return reply{}, errors.New("connection closed after " + strconv.Itoa(len(body)) + " of " + string(v[:digits]) + " body bytes")
		}
		body = body[:n]
	} else if v, ok := headerAfterSpace(head, "transfer-encoding:"); ok && hasPrefixFold(v, "chunked") {
		var err error
		if body, err = dechunk(body); err != nil {
			return reply{}, err
		}
	}
	r.body = body
	if v, ok := headerValue(head, "x-steward-protocol:"); ok {
		r.protocol, r.hasProtocol = latin1(trimJS(v)), true
	}
	return r, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// findHeader: where the value of the first header line "\r\n<name>" starts (name matched without
// regard to ASCII case), or -1.
func findHeader(head []byte, name string) int {
	for i := 0; i+2+len(name) <= len(head); i++ {
		if head[i] == '\r' && head[i+1] == '\n' && strings.EqualFold(string(head[i+2:i+2+len(name)]), name) {
			return i + 2 + len(name)
		}
	}
	return -1
}

// headerAfterSpace: the text after "\r\n<name>" and any white space (CR and LF included, as the
// TypeScript client's \s* reads it).
func headerAfterSpace(head []byte, name string) ([]byte, bool) {
	at := findHeader(head, name)
	if at < 0 {
		return nil, false
	}
	for at < len(head) && (head[at] == ' ' || head[at] == '\t' || head[at] == '\r' || head[at] == '\n' || head[at] == '\v' || head[at] == '\f' || head[at] == 0xa0) {
		at++
	}
	return head[at:], true
}

// headerValue: the rest of the header's line after spaces and tabs.
func headerValue(head []byte, name string) ([]byte, bool) {
	at := findHeader(head, name)
	if at < 0 {
		return nil, false
	}
	for at < len(head) && (head[at] == ' ' || head[at] == '\t') {
		at++
	}
	v := head[at:]
	if cr := bytes.IndexByte(v, '\r'); cr >= 0 {
		v = v[:cr]
	}
	return v, true
}

func hasPrefixFold(b []byte, lower string) bool {
	return len(b) >= len(lower) && strings.EqualFold(string(b[:len(lower)]), lower)
}

// trimJS trims what JavaScript's trim() does of a Latin-1 string.
func trimJS(b []byte) []byte {
	isSpace := func(c byte) bool {
		return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r' || c == 0xa0
	}
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// latin1 decodes header bytes as Latin-1 (each byte one character), as HTTP heads are read.
func latin1(b []byte) string {
	out := make([]rune, len(b))
	for i, c := range b {
		out[i] = rune(c)
	}
	return string(out)
}

// dechunk: a chunked body, whole; it must end with its zero-size chunk, each chunk complete.
func dechunk(buf []byte) ([]byte, error) {
	var out []byte
	i := 0
	for {
		eol := bytes.Index(buf[i:], []byte("\r\n"))
		if eol < 0 {
			return nil, errors.New("connection closed before the last chunk of the answer")
		}
		eol += i
		size, ok := chunkSize(buf[i:eol])
		if !ok {
			return nil, errors.New("malformed chunk size in the answer")
		}
		if size == 0 {
			return out, nil
		}
		if len(buf)-(eol+2) < size {
			return nil, errors.New("connection closed inside a chunk of the answer")
		}
		out = append(out, buf[eol+2:eol+2+size]...)
		i = eol + 2 + size + 2
		if i > len(buf) {
			return nil, errors.New("connection closed before the last chunk of the answer")
		}
	}
}

// chunkSize reads a chunk-size line as parseInt(line, 16) does: leading white space, an optional
// "0x", hex digits, anything after them ignored (chunk extensions).
func chunkSize(line []byte) (int, bool) {
	line = trimJS(line)
	neg := false
	if len(line) > 0 && (line[0] == '+' || line[0] == '-') {
		neg = line[0] == '-'
		line = line[1:]
	}
	if len(line) >= 2 && line[0] == '0' && (line[1] == 'x' || line[1] == 'X') {
		line = line[2:]
	}
	n, digits := 0, 0
	for ; digits < len(line); digits++ {
		c := line[digits]
		var d int
		switch {
		case isDigit(c):
			d = int(c - '0')
		case 'a' <= c && c <= 'f':
			d = int(c-'a') + 10
		case 'A' <= c && c <= 'F':
			d = int(c-'A') + 10
		default:
			goto done
		}
		if n < 1<<40 {
			n = n*16 + d
		}
	}
done:
	if digits == 0 || (neg && n != 0) {
		return 0, false
	}
	return n, true
}
