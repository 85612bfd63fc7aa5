// The shim's HTTP/1.1 client: one request to stewardd over its Unix socket, and the reading of the
// answer by HTTP/1.1's message framing (RFC 9112): a status line, a header section, then a body
// delimited by Transfer-Encoding: chunked, by Content-Length, or by the connection's close. It owns
// reply, sender, postUnix, the two kinds of error a sender returns (unreachableError,
// badAnswerError) and the errno names in their reasons. Written on bufio and net/textproto:
// net/http would add megabytes to a binary that sends one request per process.

package main

import (
	"bufio"
	"errors"
	"io"
	"math"
	"net"
	"net/textproto"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// connectBound bounds one connect, whatever the command's bound: connect(2) on a Unix socket
	// answers at once, so one that hangs will not come good by waiting out an ADD's 120 s.
	connectBound = 2 * time.Second
	// backlogPause and backlogPauseMost: the first and the longest pause before connecting again
	// to a socket whose listen backlog is full (stewardd busy, not gone).
	backlogPause     = 5 * time.Millisecond
	backlogPauseMost = 50 * time.Millisecond
	// maxHeadBytes bounds the status line and header section of the answer, and separately its
	// trailer section: stewardd sends a few hundred bytes of them.
	maxHeadBytes = 64 * 1024
	// maxChunkLineBytes bounds a chunk-size line, CRLF included: the size of the read buffer, as
	// net/http's own client bounds it.
	maxChunkLineBytes = 4096
)

// reply is stewardd's answer. protocol is its PROTOCOL_HEADER; hasProtocol false when it sent none.
type reply struct {
	status      int
	body        []byte
	protocol    string
	hasProtocol bool
}

// unreachableError: nothing usable came back, and stewardd may not have acted on the request, or
// it died while answering: stewardd could not be reached, the bound passed, or the connection
// closed before a complete answer.
type unreachableError struct {
	reason  string
	timeout bool
	status  int // the status line's code when one was read before the answer stopped; else 0
}

func (e *unreachableError) Error() string { return e.reason }

// badAnswerError: stewardd answered something that is not a usable HTTP answer (malformed, an
// interim 1xx, a transfer-coding other than chunked, over the bounds). Asking again would most
// likely get the same answer. Its reason never quotes the answer's own bytes.
type badAnswerError struct {
	reason string
	status int // the status line's code when one was read before the answer went wrong; else 0
}

func (e *badAnswerError) Error() string { return e.reason }

// statusOf: the code of the status line read before err, 0 when none was. A 2xx means stewardd
// carried the request out, whatever became of the rest of its answer.
func statusOf(err error) int {
	var u *unreachableError
	var b *badAnswerError
	switch {
	case errors.As(err, &u):
		return u.status
	case errors.As(err, &b):
		return b.status
	}
	return 0
}

// afterStatus stamps err with the status line read before it.
func afterStatus(err error, status int) error {
	var u *unreachableError
	var b *badAnswerError
	switch {
	case errors.As(err, &u):
		u.status = status
	case errors.As(err, &b):
		b.status = status
	}
	return err
}

// sender sends one request; its error, when it has one, is an *unreachableError or a
// *badAnswerError.
type sender func(socket, route string, body []byte, timeout time.Duration, headers [][2]string) (reply, error)

// postUnix is the real sender. Each connect has a bound of its own (connectBound, within
// timeout); the whole exchange is bounded by timeout through the connection's deadline.
func postUnix(socket, route string, body []byte, timeout time.Duration, headers [][2]string) (reply, error) {
	start := time.Now()
	conn, err := dial(socket, start.Add(timeout))
	if err != nil {
		return reply{}, unreachable(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(start.Add(timeout)); err != nil {
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
	// The request is written while the answer is read: stewardd may answer (a refusal) before it
	// has read the body, and close, or leave the rest unread on a connection it keeps open. The
	// answer is what counts; how the write ended does not (EPIPE or ECONNRESET once stewardd
	// closed, or an error from the deferred Close). One write (net.Buffers is writev), no
	// half-close.
	go func() {
		bufs := net.Buffers{head, body}
		_, _ = bufs.WriteTo(conn)
	}()
	return readHTTPAnswer(closeReader{conn})
}

// dial connects to socket by deadline. A full listen backlog (connect(2) on a Unix socket fails
// at once with EAGAIN, which is EWOULDBLOCK) is a busy stewardd, not a gone one: the connect is
// tried again after a pause growing from backlogPause to backlogPauseMost, for at most
// connectBound. Within a STATUS's bound that reads as no answer (its alive beacon decides); past
// connectBound an ADD answers 11 and a DEL is spooled, rather than wait out their whole bounds
// while the runtime's calls and these processes pile up.
func dial(socket string, deadline time.Time) (net.Conn, error) {
	patience := time.Now().Add(connectBound)
	pause := backlogPause
	for {
		dialer := net.Dialer{Deadline: time.Now().Add(dialBound(time.Until(deadline)))}
		conn, err := dialer.Dial("unix", socket)
		if !errors.Is(err, syscall.EAGAIN) {
			return conn, err
		}
		if time.Until(deadline) <= 0 {
			return nil, &unreachableError{reason: "its listen backlog stayed full (EAGAIN) until the bound", timeout: true}
		}
		if time.Until(patience) <= 0 {
			return nil, &unreachableError{reason: "its listen backlog stayed full (EAGAIN) for " + connectBound.String()}
		}
		time.Sleep(min(pause, time.Until(deadline), time.Until(patience)))
		pause = min(2*pause, backlogPauseMost)
	}
}

// dialBound: how long one connect may take, within what is left of the exchange's timeout.
func dialBound(timeout time.Duration) time.Duration {
	if timeout > connectBound {
		return connectBound
	}
	return timeout
}

// closeReader reads the connection, taking ECONNRESET for its end: on a Unix socket Linux reports
// ECONNRESET only once every byte the peer wrote has been read, when the peer closed with some of
// the request unread (node's server answers a refusal before reading the body), so it tells no
// more than EOF would. A complete answer is never read up to it; an answer delimited by the close
// ends there.
type closeReader struct{ net.Conn }

func (c closeReader) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if errors.Is(err, syscall.ECONNRESET) {
		err = io.EOF
	}
	return n, err
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

// The reasons of a bad answer. Fixed texts: stewardd's own bytes are never quoted (a DEL's error
// must not carry "not found", whoever wrote it), only numbers.
const (
	whyStatusLine  = "stewardd's answer has a malformed HTTP status line"
	whyHeaderLine  = "stewardd's answer has a malformed header line"
	whyCoding      = "stewardd's answer has a Transfer-Encoding other than chunked"
	whyCodingIn10  = "stewardd's HTTP/1.0 answer has a Transfer-Encoding"
	whyLengths     = "stewardd's answer has differing Content-Length values"
	whyLength      = "stewardd's answer has a Content-Length that is not a decimal number"
	whyChunkLine   = "stewardd's answer has a malformed chunk-size line"
	whyChunkEnd    = "stewardd's answer has a chunk not followed by CRLF"
	whyTrailerLine = "stewardd's answer has a malformed trailer line"
)

var (
	whyHeadTooLong    = "stewardd's answer has more than " + strconv.Itoa(maxHeadBytes) + " bytes of status line and headers"
	whyChunkLineLong  = "stewardd's answer has a chunk-size line longer than " + strconv.Itoa(maxChunkLineBytes) + " bytes"
	whyTrailerTooLong = "stewardd's answer has more than " + strconv.Itoa(maxHeadBytes) + " bytes of trailers"
	whyTooLong        = "stewardd's answer is longer than " + strconv.Itoa(maxAnswerBytes) + " bytes"
)

// The reasons of an answer cut off: the connection closed (or was reset) at that point.
const (
	closedInHead    = "connection closed before a complete HTTP response"
	closedInChunks  = "connection closed before the last chunk of the answer"
	closedInChunk   = "connection closed inside a chunk of the answer"
	closedInTrailer = "connection closed inside the trailers of the answer"
)

// meter is the reader under the answer's bufio.Reader: it counts what was read from the
// connection and ends the stream (io.EOF, hit set) at limit, so a header section is read within
// its bound however stewardd writes it.
type meter struct {
	r     io.Reader
	read  int64
	limit int64
	hit   bool
}

func (m *meter) Read(p []byte) (int, error) {
	if m.read >= m.limit {
		m.hit = true
		return 0, io.EOF
	}
	if rest := m.limit - m.read; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := m.r.Read(p)
	m.read += int64(n)
	return n, err
}

// answerReader reads one answer from src through br.
type answerReader struct {
	src *meter
	br  *bufio.Reader
	tp  *textproto.Reader
}

// bound lets the next n bytes of the answer be read (what br holds already counts).
func (a *answerReader) bound(n int64) {
	a.src.limit = a.src.read - int64(a.br.Buffered()) + n
	a.src.hit = false
}

// readHTTPAnswer reads one HTTP/1.1 answer from r, and no further than its framing says it ends:
// whatever follows (more bytes, a reset, a connection left open) is not waited for.
func readHTTPAnswer(r io.Reader) (reply, error) {
	a := &answerReader{src: &meter{r: r}}
	a.br = bufio.NewReaderSize(a.src, maxChunkLineBytes)
	a.tp = textproto.NewReader(a.br)
	return a.read()
}

func (a *answerReader) read() (reply, error) {
	a.bound(maxHeadBytes)
	line, err := a.tp.ReadLine()
	if err != nil {
		if a.src.hit {
			return reply{}, &badAnswerError{reason: whyHeadTooLong}
		}
		return reply{}, cutOff(err, closedInHead)
	}
	minor, status, ok := parseStatusLine(line)
	r, err := a.readAfter(minor, status, ok)
	if err != nil && ok {
		// What stewardd meant is known even when its answer is not: a 2xx is a request carried out.
		return reply{}, afterStatus(err, status)
	}
	return r, err
}

// readAfter reads the rest of an answer whose status line was read (as minor, status; ok false
// when it is malformed, which is told after a head cut off or too long).
func (a *answerReader) readAfter(minor byte, status int, ok bool) (reply, error) {
	header, herr := a.tp.ReadMIMEHeader()
	if herr != nil {
		if a.src.hit {
			return reply{}, &badAnswerError{reason: whyHeadTooLong}
		}
		var pe textproto.ProtocolError
		if !errors.As(herr, &pe) {
			// A head cut off is no answer, whatever its first line was.
			return reply{}, cutOff(herr, closedInHead)
		}
	}
	if !ok {
		return reply{}, &badAnswerError{reason: whyStatusLine}
	}
	if herr != nil {
		return reply{}, &badAnswerError{reason: whyHeaderLine}
	}
	a.src.limit = math.MaxInt64
	// The shim sends no Expect: 100-continue and stewardd sends no other 1xx: one here is refused,
	// not skipped for what may follow it (as RFC 9110 §15.2 has a client do).
	if status >= 100 && status < 200 {
		return reply{}, &badAnswerError{reason: "stewardd's answer has the interim status " + strconv.Itoa(status)}
	}
	if status < 100 || status > 599 {
		return reply{}, &badAnswerError{reason: "stewardd's answer has the status " + strconv.Itoa(status) + ", not one of 200-599"}
	}

	// RFC 9112 §6.1: Transfer-Encoding was added in HTTP/1.1; an HTTP/1.0 message that has one is
	// treated as faulty framing, Content-Length or not. Of the transfer-codings only chunked,
	// alone, is read: stewardd applies no other, and the shim could not undo one (RFC 9112 §6.3
	// item 4 would read such a body to the close, still coded).
	te, hasTE := header["Transfer-Encoding"]
	if hasTE && minor == '0' {
		return reply{}, &badAnswerError{reason: whyCodingIn10}
	}
	if hasTE && (len(te) != 1 || !isChunked(te[0])) {
		return reply{}, &badAnswerError{reason: whyCoding}
	}
	// RFC 9110 §8.6: a Content-Length is a decimal number; repeated with differing values the
	// framing is unknown. Checked even where Transfer-Encoding overrides it (RFC 9112 §6.3 item
	// 3): an answer carrying a broken one is not to be trusted either.
	length := int64(-1)
	if cl, has := header["Content-Length"]; has {
		for _, v := range cl[1:] {
			if v != cl[0] {
				return reply{}, &badAnswerError{reason: whyLengths}
			}
		}
		n, ok := decimal(cl[0])
		if !ok {
			return reply{}, &badAnswerError{reason: whyLength}
		}
		length = n
	}

	r := reply{status: status}
	if v := header.Values(protocolHeader); len(v) > 0 {
		r.protocol, r.hasProtocol = strings.Trim(v[0], " \t"), true
	}
	// RFC 9112 §6.3: the body's length, in the order of precedence it sets.
	var err error
	switch {
	case status == 204 || status == 304:
		// Item 1: such an answer ends with its header section, whatever its fields say.
		r.body = []byte{}
	case hasTE:
		// Item 4: chunked, over any Content-Length (item 3).
		r.body, err = a.chunked()
	case length >= 0:
		// Item 6: exactly Content-Length bytes; the connection need not close after them.
		r.body, err = a.sized(length)
	default:
		// Item 8: the body runs to the close.
		r.body, err = a.toClose()
	}
	if err != nil {
		return reply{}, err
	}
	return r, nil
}

// parseStatusLine reads RFC 9112 §4's status-line (HTTP-version SP status-code SP
// [ reason-phrase ]) of HTTP/1.0 or HTTP/1.1: the version's minor digit and the status code.
// The reason-phrase, HTAB, SP, VCHAR or obs-text, is not kept.
func parseStatusLine(line string) (minor byte, status int, ok bool) {
	if len(line) < len("HTTP/1.1 200 ") || line[:len("HTTP/1.")] != "HTTP/1." || (line[7] != '0' && line[7] != '1') ||
		line[8] != ' ' || !isDigit(line[9]) || !isDigit(line[10]) || !isDigit(line[11]) || line[12] != ' ' {
		return 0, 0, false
	}
	for i := 13; i < len(line); i++ {
		if c := line[i]; c != '\t' && (c < ' ' || c == 0x7f) {
			return 0, 0, false
		}
	}
	return line[7], int(line[9]-'0')*100 + int(line[10]-'0')*10 + int(line[11]-'0'), true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isChunked: the transfer-coding named chunked, in any ASCII case (RFC 9112 §7: codings are
// case-insensitive), and nothing else.
func isChunked(v string) bool {
	const name = "chunked"
	if len(v) != len(name) {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != name[i] {
			return false
		}
	}
	return true
}

// decimal reads 1*DIGIT that fits an int64; no sign, no space, no list.
func decimal(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// cutOff: the error for an answer that stopped at err. The connection's end there is no answer
// (stewardd died or closed mid-answer), never a part of one used; any other error names itself.
func cutOff(err error, closed string) *unreachableError {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return &unreachableError{reason: closed}
	}
	return unreachable(err)
}

// sized reads a body of exactly n bytes, and nothing after it. The buffer grows as the bytes come,
// not to the size announced.
func (a *answerReader) sized(n int64) ([]byte, error) {
	if n > maxAnswerBytes {
		return nil, &badAnswerError{reason: whyTooLong}
	}
	body, err := io.ReadAll(io.LimitReader(a.br, n))
	if err != nil {
		return nil, unreachable(err)
	}
	if int64(len(body)) < n {
		return nil, &unreachableError{reason: "connection closed after " + strconv.Itoa(len(body)) + " of " +
			strconv.FormatInt(n, 10) + " body bytes"}
	}
	return body, nil
}

// toClose reads a body delimited by the connection's close, within maxAnswerBytes.
func (a *answerReader) toClose() ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(a.br, maxAnswerBytes+1))
	if err != nil {
		return nil, unreachable(err)
	}
	if len(body) > maxAnswerBytes {
		return nil, &badAnswerError{reason: whyTooLong}
	}
	return body, nil
}

// chunked reads a chunked body (RFC 9112 §7.1): chunks until the last-chunk, then the trailer
// section, read and dropped, and its final CRLF. The data of the chunks is the body, within
// maxAnswerBytes.
func (a *answerReader) chunked() ([]byte, error) {
	body := []byte{}
	for {
		line, err := a.br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			return nil, &badAnswerError{reason: whyChunkLineLong}
		}
		if err != nil {
			return nil, cutOff(err, closedInChunks)
		}
		size, ok := chunkSize(line)
		if !ok {
			return nil, &badAnswerError{reason: whyChunkLine}
		}
		if size == 0 {
			break
		}
		if size > maxAnswerBytes-len(body) {
			return nil, &badAnswerError{reason: whyTooLong}
		}
		chunk, err := io.ReadAll(io.LimitReader(a.br, int64(size)))
		if err != nil {
			return nil, unreachable(err)
		}
		if len(chunk) < size {
			return nil, &unreachableError{reason: closedInChunk}
		}
		body = append(body, chunk...)
		var crlf [2]byte
		if _, err := io.ReadFull(a.br, crlf[:]); err != nil {
			return nil, cutOff(err, closedInChunk)
		}
		if crlf != [2]byte{'\r', '\n'} {
			return nil, &badAnswerError{reason: whyChunkEnd}
		}
	}
	// trailer-section CRLF: field lines as in the header section (RFC 9112 §7.1.2), up to and
	// with the empty line; their meaning is not needed.
	a.bound(maxHeadBytes)
	if _, err := a.tp.ReadMIMEHeader(); err != nil {
		if a.src.hit {
			return nil, &badAnswerError{reason: whyTrailerTooLong}
		}
		var pe textproto.ProtocolError
		if errors.As(err, &pe) {
			return nil, &badAnswerError{reason: whyTrailerLine}
		}
		return nil, cutOff(err, closedInTrailer)
	}
	return body, nil
}

// chunkSize reads a chunk-size line (RFC 9112 §7.1: chunk-size [ chunk-ext ] CRLF, chunk-size
// 1*HEXDIG): the size, and whether the line is one. Extensions (BWS ";" …) are skipped unread;
// a CR anywhere but before the LF is not one. A size past maxAnswerBytes reads as
// maxAnswerBytes + 1: the body is too long however much more it is.
func chunkSize(line []byte) (int, bool) {
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return 0, false
	}
	line = line[:len(line)-2]
	size, digits := 0, 0
	for ; digits < len(line); digits++ {
		d, isHex := hexValue(line[digits])
		if !isHex {
			break
		}
		if size = size*16 + d; size > maxAnswerBytes {
			size = maxAnswerBytes + 1
		}
	}
	if digits == 0 {
		return 0, false
	}
	rest := line[digits:]
	for len(rest) > 0 && (rest[0] == ' ' || rest[0] == '\t') {
		rest = rest[1:]
	}
	if len(rest) == 0 {
		// Nothing after the size, or white space alone (the grammar has it only before a ";").
		return size, digits == len(line)
	}
	for _, c := range rest {
		if c == '\r' {
			return 0, false
		}
	}
	return size, rest[0] == ';'
}

func hexValue(c byte) (int, bool) {
	switch {
	case isDigit(c):
		return int(c - '0'), true
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10, true
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10, true
	}
	return 0, false
}
