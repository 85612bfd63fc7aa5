// The HTTP/1.1 client (client.go): the reading of answers from bytes (TestReadAnswer), and
// postUnix against a fake stewardd on a Unix socket that answers, resets, holds the connection
// open or cuts off as each case says (TestPostUnix and the tests after it).

package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// outcome is what a case expects: an answer, or an error of one kind whose reason contains why.
type outcome struct {
	status      int
	body        string
	protocol    string
	hasProtocol bool
	kind        string // "", "unreachable" or "bad"
	why         string
}

func checkOutcome(t *testing.T, r reply, err error, want outcome) {
	t.Helper()
	if want.kind == "" {
		if err != nil {
			t.Fatalf("error %T %v, want an answer", err, err)
		}
		if r.status != want.status || string(r.body) != want.body || r.protocol != want.protocol || r.hasProtocol != want.hasProtocol {
			t.Fatalf("answer %d %q protocol %q/%v, want %d %q protocol %q/%v", r.status, r.body, r.protocol, r.hasProtocol,
				want.status, want.body, want.protocol, want.hasProtocol)
		}
		return
	}
	var reason string
	switch want.kind {
	case "unreachable":
		var u *unreachableError
		if !errors.As(err, &u) {
			t.Fatalf("got %T %v (answer %d %q), want an unreachableError", err, err, r.status, r.body)
		}
		reason = u.reason
	case "bad":
		var b *badAnswerError
		if !errors.As(err, &b) {
			t.Fatalf("got %T %v (answer %d %q), want a badAnswerError", err, err, r.status, r.body)
		}
		reason = b.reason
	}
	if !strings.Contains(reason, want.why) {
		t.Fatalf("reason %q, want it to contain %q", reason, want.why)
	}
	if lower := strings.ToLower(reason); strings.Contains(lower, "not found") || strings.Contains(lower, "no such file or directory") {
		t.Fatalf("reason %q reads as success in a DEL's error", reason)
	}
}

func wantAnswer(status int, body string) outcome { return outcome{status: status, body: body} }
func wantAnswerV2(status int, body string) outcome {
	return outcome{status: status, body: body, protocol: "2", hasProtocol: true}
}
func wantBad(why string) outcome         { return outcome{kind: "bad", why: why} }
func wantUnreachable(why string) outcome { return outcome{kind: "unreachable", why: why} }

const ok200 = "HTTP/1.1 200 OK\r\n"

type answerCase struct {
	name string
	raw  string
	want outcome
}

// answerCases are read from bytes here and seed FuzzParseResponse.
var answerCases = []answerCase{
	{"a sized answer is read to its length and what follows is left", ok200 + "x-steward-protocol: 2\r\nContent-Length: 2\r\n\r\n{}junk", wantAnswerV2(200, "{}")},
	{"a sized HTTP/1.0 answer is read to its length", "HTTP/1.0 400 X\r\ncontent-length:\t7\r\n\r\n{\"a\":1}junk", wantAnswer(400, `{"a":1}`)},
	{"a Content-Length repeated with one value is read", ok200 + "Content-Length: 1\r\nContent-Length: 1\r\n\r\nab", wantAnswer(200, "a")},
	{"a Content-Length with leading zeros is read", ok200 + "Content-Length: 002\r\n\r\nab", wantAnswer(200, "ab")},
	{"an empty sized body is read", ok200 + "Content-Length: 0\r\n\r\n", wantAnswer(200, "")},
	{"Transfer-Encoding wins over Content-Length and the body is de-chunked", ok200 + "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", wantAnswer(200, "abc")},
	{"chunked is read in any ASCII case", ok200 + "Transfer-Encoding: ChUnKeD\r\n\r\n1\r\na\r\n0\r\n\r\n", wantAnswer(200, "a")},
	{"chunk sizes are hex digits of either case, a to f and A to F", ok200 + "Transfer-Encoding: chunked\r\n\r\na\r\n0123456789\r\nF\r\n0123456789abcde\r\nA\r\n0123456789\r\nf\r\n0123456789abcde\r\n0\r\n\r\n", wantAnswer(200, "01234567890123456789abcde01234567890123456789abcde")},
	{"a chunk-size digit just past f or F is no size", ok200 + "Transfer-Encoding: chunked\r\n\r\ng\r\n", wantBad("stewardd's answer has a malformed chunk-size line")},
	{"a chunked answer is de-chunked, its extensions skipped", ok200 + "X-Steward-Protocol:  2 \r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n2;ext=1\r\n1}\r\n0\r\n\r\n", wantAnswerV2(200, `{"a":1}`)},
	{"white space before a chunk extension is skipped", ok200 + "Transfer-Encoding: chunked\r\n\r\n3 \t;x=\"y\"\r\nabc\r\n0;z\r\n\r\n", wantAnswer(200, "abc")},
	{"hex chunk sizes of either case are read", ok200 + "Transfer-Encoding: chunked\r\n\r\na\r\n0123456789\r\n0B\r\n0123456789a\r\n00\r\n\r\n", wantAnswer(200, "01234567890123456789a")},
	{"a chunked answer with trailers is read and its trailers dropped", ok200 + "Transfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n2\r\nok\r\n0\r\nX-T: 1\r\nX-U: 2\r\n\r\nnext", wantAnswer(200, "ok")},
	{"an HTTP/1.0 answer without a length runs to the close", "HTTP/1.0 200 OK\r\nx-steward-protocol: 2\r\n\r\n{\"a\":1}\r\n", wantAnswerV2(200, "{\"a\":1}\r\n")},
	{"an HTTP/1.1 answer without a length runs to the close", "HTTP/1.1 503 Busy\r\n\r\nlater", wantAnswer(503, "later")},
	{"a 204 has no body whatever its fields say", "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nabcde", wantAnswer(204, "")},
	{"a 304 has no body even when chunked", "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\nzz", wantAnswer(304, "")},
	{"a status line with an empty reason is read", "HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n", wantAnswer(200, "")},
	{"a reason with tabs and obs-text is read", "HTTP/1.1 599 a\tb \xe9\r\nContent-Length: 0\r\n\r\n", wantAnswer(599, "")},
	{"lines ending in a bare LF are read (RFC 9112 §2.2)", "HTTP/1.1 200 OK\nContent-Length: 1\n\nab", wantAnswer(200, "a")},
	{"the protocol header is trimmed of spaces and tabs only, its bytes kept", ok200 + "X-Steward-Protocol:\t 3 \xe9 \t\r\nContent-Length: 0\r\n\r\n", outcome{status: 200, protocol: "3 \xe9", hasProtocol: true}},
	{"an empty protocol header is there", ok200 + "x-steward-protocol:\r\nContent-Length: 0\r\n\r\n", outcome{status: 200, hasProtocol: true}},
	{"the first of two protocol headers is taken", ok200 + "x-steward-protocol: 2\r\nX-Steward-Protocol: 3\r\nContent-Length: 0\r\n\r\n", wantAnswerV2(200, "")},

	{"nothing at all is no answer", "", wantUnreachable(closedInHead)},
	{"a head cut off before its empty line is no answer", ok200 + "Content-Length: 2\r\n", wantUnreachable(closedInHead)},
	{"a status line cut off is no answer", "HTTP/1.1 2", wantUnreachable(closedInHead)},
	{"a sized body cut off is no answer, saying how much came", ok200 + "Content-Length: 10\r\n\r\nabc", wantUnreachable("connection closed after 3 of 10 body bytes")},
	{"a Content-Length far past the cap is a bad answer, its body unread", ok200 + "Content-Length: 99999999\r\n\r\n", wantBad(whyTooLong)},
	{"a chunked answer without its last chunk is no answer", ok200 + "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n", wantUnreachable(closedInChunks)},
	{"a chunked answer cut inside a chunk is no answer", ok200 + "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"", wantUnreachable(closedInChunk)},
	{"a chunked answer cut before a chunk's CRLF is no answer", ok200 + "Transfer-Encoding: chunked\r\n\r\n2\r\nab\r", wantUnreachable(closedInChunk)},
	{"a chunked answer cut inside a chunk-size line is no answer", ok200 + "Transfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0", wantUnreachable(closedInChunks)},
	{"a chunked answer cut before its final CRLF is no answer", ok200 + "Transfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n", wantUnreachable(closedInTrailer)},
	{"a chunked answer cut inside its trailers is no answer", ok200 + "Transfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\r\n", wantUnreachable(closedInTrailer)},

	{"garbage ending in an empty line is a bad answer", "garbage\r\n\r\n", wantBad(whyStatusLine)},
	{"an HTTP/2.0 status line is a bad answer", "HTTP/2.0 200 OK\r\n\r\n", wantBad(whyStatusLine)},
	{"an HTTP/1.2 status line is a bad answer", "HTTP/1.2 200 OK\r\n\r\n", wantBad(whyStatusLine)},
	{"a status line without the space before its reason is a bad answer", "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", wantBad(whyStatusLine)},
	{"a status line with two spaces before its code is a bad answer", "HTTP/1.1  200 OK\r\n\r\n", wantBad(whyStatusLine)},
	{"a status code that is not three digits is a bad answer", "HTTP/1.1 +20 OK\r\n\r\n", wantBad(whyStatusLine)},
	{"a CR inside the reason is a bad answer", "HTTP/1.1 200 O\rK\r\nContent-Length: 0\r\n\r\n", wantBad(whyStatusLine)},
	{"a DEL inside the reason is a bad answer", "HTTP/1.1 200 O\x7fK\r\nContent-Length: 0\r\n\r\n", wantBad(whyStatusLine)},
	{"a malformed status line is named before a malformed header", "HTTP/1.1 2x0 OK\r\nno colon\r\n\r\n", wantBad(whyStatusLine)},
	{"a 100 Continue before the answer is a bad answer", "HTTP/1.1 100 Continue\r\n\r\n" + ok200 + "Content-Length: 2\r\n\r\n{}", wantBad("interim status 100")},
	{"a 199 is a bad answer", "HTTP/1.1 199 X\r\n\r\n", wantBad("interim status 199")},
	{"a status past 599 is a bad answer", "HTTP/1.1 600 X\r\nContent-Length: 0\r\n\r\n", wantBad("status 600, not one of 200-599")},
	{"a status below 100 is a bad answer", "HTTP/1.1 099 X\r\nContent-Length: 0\r\n\r\n", wantBad("status 99, not one of 200-599")},
	{"a header line without a colon is a bad answer", ok200 + "Content-Length 2\r\n\r\n{}", wantBad(whyHeaderLine)},
	{"a header section starting with white space is a bad answer", ok200 + " X: 1\r\n\r\n", wantBad(whyHeaderLine)},
	{"a control character in a header value is a bad answer", ok200 + "X: a\x01b\r\n\r\n", wantBad(whyHeaderLine)},
	{"a header section past 64 KiB is a bad answer", ok200 + strings.Repeat("X-Pad: "+strings.Repeat("p", 1000)+"\r\n", 70) + "\r\n", wantBad(whyHeadTooLong)},
	{"a status line past 64 KiB is a bad answer", "HTTP/1.1 200 " + strings.Repeat("r", 70000) + "\r\n\r\n", wantBad(whyHeadTooLong)},
	{"a header line past 64 KiB without a colon is a bad answer", ok200 + strings.Repeat("x", 70000) + "\r\n\r\n", wantBad(whyHeadTooLong)},
	{"identity, chunked is a bad answer", ok200 + "Transfer-Encoding: identity, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", wantBad(whyCoding)},
	{"deflate is a bad answer", ok200 + "Transfer-Encoding: deflate\r\nContent-Length: 3\r\n\r\nabc", wantBad(whyCoding)},
	{"gzip is a bad answer", ok200 + "Transfer-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc", wantBad(whyCoding)},
	{"chunked, chunked is a bad answer", ok200 + "Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", wantBad(whyCoding)},
	{"two Transfer-Encoding fields are a bad answer", ok200 + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", wantBad(whyCoding)},
	{"an empty Transfer-Encoding is a bad answer", ok200 + "Transfer-Encoding:\r\nContent-Length: 0\r\n\r\n", wantBad(whyCoding)},
	{"Transfer-Encoding in HTTP/1.0 is a bad answer (RFC 9112 §6.1)", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", wantBad(whyCodingIn10)},
	{"differing Content-Length values are a bad answer", ok200 + "Content-Length: 2\r\nContent-Length: 3\r\n\r\nabc", wantBad(whyLengths)},
	{"one value written two ways is a bad answer", ok200 + "Content-Length: 2\r\nContent-Length: 02\r\n\r\nab", wantBad(whyLengths)},
	{"a signed Content-Length is a bad answer", ok200 + "Content-Length: +2\r\n\r\nab", wantBad(whyLength)},
	{"a Content-Length list is a bad answer", ok200 + "Content-Length: 2, 2\r\n\r\nab", wantBad(whyLength)},
	{"a Content-Length that is not a number is a bad answer", ok200 + "Content-Length: x\r\n\r\nabc", wantBad(whyLength)},
	{"an empty Content-Length is a bad answer", ok200 + "Content-Length:\r\n\r\nabc", wantBad(whyLength)},
	{"a Content-Length past int64 is a bad answer", ok200 + "Content-Length: 99999999999999999999\r\n\r\nabc", wantBad(whyLength)},
	{"a broken Content-Length beside chunked is a bad answer", ok200 + "Content-Length: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", wantBad(whyLength)},
	{"a Content-Length past the cap is a bad answer", ok200 + "Content-Length: 4194305\r\n\r\n", wantBad(whyTooLong)},
	{"a chunk-size in 0x form is a bad answer", ok200 + "Transfer-Encoding: chunked\r\n\r\n0x3\r\nabc\r\n0\r\n\r\n", wantBad(whyChunkLine)},
	{"a signed chunk-size is a bad answer", ok200 + "Transfer-Encoding: chunked\r\n\r\n+3\r\nabc\r\n0\r\n\r\n", wantBad(whyChunkLine)},
	{"a negative chunk-size is a bad answer", ok200 + "Transfer-Encoding: chunked\r\n\r\n-3\r\nabc\r\n0\r\n\r\n", wantBad(whyChunkLine)},
	{"white space before a chunk-size is a bad answer", ok200 + "Transfer-Encoding: chunked\r\n\r\n 3\r\nabc\r\n0\r\n\r\n", wantBad(whyChunkLine)},
	{"white space after a chunk-size without an extension is a bad answer", ok200 + "Transfer-Encoding: chunked\r\n\r\n3 \r\nabc\r\n0\r\n\r\n", wantBad(whyChunkLine)},
	{"an empty chunk-size line is a bad answer", ok200 + "Transfer-Encoding: chunked\r\n\r\n\r\nabc\r\n0\r\n\r\n", wantBad(whyChunkLine)},
	{"a chunk-size line ending in a bare LF is a bad answer", ok200 + "Transfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n", wantBad(whyChunkLine)},
	{"a CR inside a chunk extension is a bad answer", ok200 + "Transfer-Encoding: chunked\r\n\r\n3;a\rb\r\nabc\r\n0\r\n\r\n", wantBad(whyChunkLine)},
	{"a chunk-size line longer than 4096 bytes is a bad answer", ok200 + "Transfer-Encoding: chunked\r\n\r\n3;" + strings.Repeat("e", 5000) + "\r\nabc\r\n0\r\n\r\n", wantBad(whyChunkLineLong)},
	{"a chunk not followed by CRLF is a bad answer", ok200 + "Transfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n0\r\n\r\n", wantBad(whyChunkEnd)},
	{"a chunk larger than the cap is a bad answer before it is read", ok200 + "Transfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFFFF\r\nabc", wantBad(whyTooLong)},
	{"chunks adding up past the cap are a bad answer", ok200 + "Transfer-Encoding: chunked\r\n\r\n1\r\na\r\n400000\r\n", wantBad(whyTooLong)},
	{"a malformed trailer line is a bad answer", ok200 + "Transfer-Encoding: chunked\r\n\r\n0\r\nno colon\r\n\r\n", wantBad(whyTrailerLine)},
	{"trailers past 64 KiB are a bad answer", ok200 + "Transfer-Encoding: chunked\r\n\r\n0\r\n" + strings.Repeat("X-T: "+strings.Repeat("t", 1000)+"\r\n", 70) + "\r\n", wantBad(whyTrailerTooLong)},
}

func TestReadAnswer(t *testing.T) {
	for _, c := range answerCases {
		c := c
		t.Run(c.name, func(t *testing.T) {
			r, err := readHTTPAnswer(strings.NewReader(c.raw))
			checkOutcome(t, r, err, c.want)
		})
	}
}

func TestAnAnswerPastTheCapToTheCloseIsABadAnswer(t *testing.T) {
	raw := "HTTP/1.1 200 OK\r\n\r\n" + strings.Repeat("x", maxAnswerBytes+1)
	r, err := readHTTPAnswer(strings.NewReader(raw))
	checkOutcome(t, r, err, wantBad("stewardd's answer is longer than 4194304 bytes"))
	r, err = readHTTPAnswer(strings.NewReader(raw[:len(raw)-1]))
	if err != nil || len(r.body) != maxAnswerBytes {
		t.Fatalf("an answer of the cap: %d bytes, %v", len(r.body), err)
	}
}

func TestAReadErrorIsNamed(t *testing.T) {
	fail := errors.New("read failed")
	for _, raw := range []string{"", ok200, ok200 + "Content-Length: 3\r\n\r\na", ok200 + "\r\nab", ok200 + "Transfer-Encoding: chunked\r\n\r\n1\r\n"} {
		r, err := readHTTPAnswer(io.MultiReader(strings.NewReader(raw), iotestErr{fail}))
		checkOutcome(t, r, err, wantUnreachable("read failed"))
	}
	r, err := readHTTPAnswer(iotestErr{&net.OpError{Op: "read", Net: "unix", Err: syscall.ECONNREFUSED}})
	checkOutcome(t, r, err, wantUnreachable("ECONNREFUSED"))
}

type iotestErr struct{ err error }

func (e iotestErr) Read([]byte) (int, error) { return 0, e.err }

// fakeStewardd listens on a Unix socket in a temp dir and runs handle on each connection, with
// the request's head already read (br holds what came after it); the connection is closed when
// handle returns. Handlers that hold a connection open wait on done, closed at the test's end.
func fakeStewardd(t *testing.T, handle func(c net.Conn, br *bufio.Reader, contentLength int, done <-chan struct{})) string {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	serveFake(t, ln, handle)
	return socket
}

// serveFake runs handle on each connection ln accepts, as fakeStewardd describes, until the test ends.
func serveFake(t *testing.T, ln net.Listener, handle func(c net.Conn, br *bufio.Reader, contentLength int, done <-chan struct{})) {
	done := make(chan struct{})
	t.Cleanup(func() {
		close(done)
		ln.Close()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				n := -1
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					if line == "\r\n" {
						break
					}
					if k, v, found := strings.Cut(line, ":"); found && strings.EqualFold(k, "content-length") {
						n, _ = strconv.Atoi(strings.TrimSpace(v))
					}
				}
				handle(c, br, n, done)
			}()
		}
	}()
}

// fullBacklog listens on a Unix socket with a backlog of 1, never accepting, and fills the backlog
// with non-blocking connects until one fails with EAGAIN: the next connect(2) fails so at once, as
// to a stewardd too busy to accept. It returns the socket and the listening socket's file.
func fullBacklog(t *testing.T) (string, *os.File) {
	t.Helper()
	dir, err := os.MkdirTemp("", "stb") // short: a Unix socket's path is at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "s.sock")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ln := os.NewFile(uintptr(fd), "backlog")
	t.Cleanup(func() { ln.Close() })
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: socket}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 1); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		c, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Close(c) })
		err = syscall.Connect(c, &syscall.SockaddrUnix{Name: socket})
		if err == syscall.EAGAIN {
			return socket, ln
		}
		if err != nil || i == 100 {
			t.Fatalf("connect %d: %v; the backlog never filled", i, err)
		}
	}
}

// A full listen backlog is a stewardd too busy to accept, not a gone one: the connect is tried
// again until the bound, which then is a timeout (no answer within it), and gets through as soon as
// stewardd accepts again.
func TestAFullListenBacklogIsWaitedOutWithinTheBound(t *testing.T) {
	socket, ln := fullBacklog(t)
	start := time.Now()
	_, err := postUnix(socket, "/v1/cni", []byte("{}"), 300*time.Millisecond, nil)
	var u *unreachableError
	if took := time.Since(start); !errors.As(err, &u) || !u.timeout || took < 300*time.Millisecond {
		t.Fatalf("%T %v after %v, want a timeout at the 300 ms bound", err, err, took)
	}

	got := make(chan error, 1)
	go func() {
		r, err := postUnix(socket, "/v1/cni", []byte("{}"), 30*time.Second, nil)
		if err == nil && r.status != 200 {
			err = errors.New("status " + strconv.Itoa(r.status))
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond)
	l, err := net.FileListener(ln)
	if err != nil {
		t.Fatal(err)
	}
	serveFake(t, l, answers(ok200+"Content-Length: 0\r\n\r\n"))
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("once stewardd accepts: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10 s of stewardd accepting again")
	}
}

// A backlog that stays full longer than connectBound is given up on there, not at a long
// command bound: an ADD answers 11 and a DEL is spooled rather than wait out 120 s or 30 s.
func TestABacklogFullPastTheConnectBoundIsGivenUpOn(t *testing.T) {
	socket, _ := fullBacklog(t)
	start := time.Now()
	_, err := postUnix(socket, "/v1/cni", []byte("{}"), 30*time.Second, nil)
	took := time.Since(start)
	var u *unreachableError
	if !errors.As(err, &u) || u.timeout || !strings.Contains(u.reason, "listen backlog stayed full (EAGAIN) for 2s") {
		t.Fatalf("%T %v, want the backlog named, not a timeout", err, err)
	}
	if took < connectBound || took > connectBound+time.Second {
		t.Fatalf("gave up after %v, want about %v", took, connectBound)
	}
}

// answers returns a handler that reads the whole request, writes raw and closes.
func answers(raw string) func(net.Conn, *bufio.Reader, int, <-chan struct{}) {
	return func(c net.Conn, br *bufio.Reader, n int, _ <-chan struct{}) {
		if _, err := io.CopyN(io.Discard, br, int64(n)); err != nil {
			return
		}
		_, _ = c.Write([]byte(raw))
	}
}

// answersThenHolds reads the whole request, writes raw and keeps the connection open.
func answersThenHolds(raw string) func(net.Conn, *bufio.Reader, int, <-chan struct{}) {
	return func(c net.Conn, br *bufio.Reader, n int, done <-chan struct{}) {
		answers(raw)(c, br, n, done)
		<-done
	}
}

// answersUnread writes raw without reading the request's body, then closes: with a body bigger
// than the socket's buffers some of it is unread, and the kernel resets the connection.
func answersUnread(raw string) func(net.Conn, *bufio.Reader, int, <-chan struct{}) {
	return func(c net.Conn, _ *bufio.Reader, _ int, _ <-chan struct{}) {
		_, _ = c.Write([]byte(raw))
	}
}

var bigBody = bytes.Repeat([]byte("b"), 4<<20)

func TestPostUnix(t *testing.T) {
	sized := ok200 + "x-steward-protocol: 2\r\nContent-Length: 2\r\n\r\n{}"
	for _, c := range []struct {
		name   string
		handle func(net.Conn, *bufio.Reader, int, <-chan struct{})
		body   []byte
		want   outcome
	}{
		{"a complete answer followed by ECONNRESET is kept", answersUnread(sized), bigBody, wantAnswerV2(200, "{}")},
		{"a refusal answered before the body was read on a connection left open is kept", func(c net.Conn, _ *bufio.Reader, _ int, done <-chan struct{}) {
			_, _ = c.Write([]byte("HTTP/1.1 400 X\r\nx-steward-protocol: 2\r\nContent-Length: 2\r\n\r\n{}"))
			<-done
		}, bigBody, wantAnswerV2(400, "{}")},
		{"an answer to the close ended by ECONNRESET is whole", answersUnread("HTTP/1.0 200 OK\r\nx-steward-protocol: 2\r\n\r\n{\"a\":1}"), bigBody, wantAnswerV2(200, `{"a":1}`)},
		{"a sized answer on a connection left open is returned without waiting for the close", answersThenHolds(sized), []byte("{}"), wantAnswerV2(200, "{}")},
		{"a chunked answer on a connection left open is returned without waiting for the close", answersThenHolds(ok200 + "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"), []byte("{}"), wantAnswer(200, "{}")},
		{"Transfer-Encoding wins over Content-Length", answers(ok200 + "Content-Length: 30\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"), []byte("{}"), wantAnswer(200, "{}")},
		{"identity, chunked is a bad answer", answers(ok200 + "Transfer-Encoding: identity, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"), []byte("{}"), wantBad(whyCoding)},
		{"a 100 Continue then a 200 is a bad answer", answers("HTTP/1.1 100 Continue\r\n\r\n" + sized), []byte("{}"), wantBad("interim status 100")},
		{"an answer past the cap is a bad answer", answersThenHolds(ok200 + "Content-Length: 4194305\r\n\r\n"), []byte("{}"), wantBad(whyTooLong)},
		{"an answer past the cap to the close is a bad answer", answers("HTTP/1.0 200 OK\r\n\r\n" + strings.Repeat("x", maxAnswerBytes+1)), []byte("{}"), wantBad(whyTooLong)},
		{"a body cut off is no answer", answers(ok200 + "Content-Length: 40\r\n\r\n{\"cniVersion\":\"1.0.0\""), []byte("{}"), wantUnreachable("connection closed after 21 of 40 body bytes")},
		{"a chunked answer with trailers is read", answers(ok200 + "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nX-Done: 1\r\n\r\n"), []byte("{}"), wantAnswer(200, "{}")},
		{"an HTTP/1.0 answer to the close is read", answers("HTTP/1.0 200 OK\r\n\r\n{}"), []byte("{}"), wantAnswer(200, "{}")},
		{"a connection closed without an answer is no answer", answers(""), []byte("{}"), wantUnreachable(closedInHead)},
		{"a connection reset without an answer is no answer", answersUnread(""), bigBody, wantUnreachable(closedInHead)},
	} {
		c := c
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			socket := fakeStewardd(t, c.handle)
			type result struct {
				r   reply
				err error
			}
			got := make(chan result, 1)
			go func() {
				r, err := postUnix(socket, "/v1/cni", c.body, 60*time.Second, nil)
				got <- result{r, err}
			}()
			select {
			case res := <-got:
				checkOutcome(t, res.r, res.err, c.want)
			case <-time.After(30 * time.Second):
				t.Fatal("no result within 30 s of a 60 s bound: the answer was waited past its end")
			}
		})
	}
}

// The reset in the cases above is real: a client reading to the end of the same fake stewardd
// gets the answer, then ECONNRESET.
func TestAnAnswerBeforeTheBodyIsReadEndsInAReset(t *testing.T) {
	const raw = "HTTP/1.1 400 X\r\nContent-Length: 2\r\n\r\n{}"
	socket := fakeStewardd(t, answersUnread(raw))
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	go func() {
		_, _ = c.Write(append([]byte("POST /v1/cni HTTP/1.1\r\nContent-Length: "+strconv.Itoa(len(bigBody))+"\r\n\r\n"), bigBody...))
	}()
	got, err := io.ReadAll(c)
	if string(got) != raw || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read %q then %v, want the answer then ECONNRESET", got, err)
	}
}

func TestTheRequestArrivesWhole(t *testing.T) {
	type request struct {
		head string
		body []byte
	}
	got := make(chan request, 1)
	socket := fakeStewardd(t, func(c net.Conn, br *bufio.Reader, n int, _ <-chan struct{}) {
		body := make([]byte, n)
		if _, err := io.ReadFull(br, body); err == nil {
			got <- request{body: body}
		}
		_, _ = c.Write([]byte(ok200 + "Content-Length: 0\r\n\r\n"))
	})
	r, err := postUnix(socket, "/v1/cni", bigBody, 60*time.Second, [][2]string{{"x-cni-network", "n"}})
	if err != nil || r.status != 200 {
		t.Fatalf("%+v %v", r, err)
	}
	if req := <-got; !bytes.Equal(req.body, bigBody) {
		t.Fatalf("stewardd read %d bytes of %d", len(req.body), len(bigBody))
	}
}

func TestAFrozenStewarddTimesOut(t *testing.T) {
	socket := fakeStewardd(t, func(_ net.Conn, _ *bufio.Reader, _ int, done <-chan struct{}) { <-done })
	_, err := postUnix(socket, "/v1/cni", []byte("{}"), 100*time.Millisecond, nil)
	var u *unreachableError
	if !errors.As(err, &u) || !u.timeout {
		t.Fatalf("%T %v, want a timeout", err, err)
	}
}

func TestADialPastItsBoundTimesOut(t *testing.T) {
	socket := fakeStewardd(t, answers(ok200+"Content-Length: 0\r\n\r\n"))
	_, err := postUnix(socket, "/v1/cni", []byte("{}"), -time.Second, nil)
	var u *unreachableError
	if !errors.As(err, &u) || !u.timeout {
		t.Fatalf("%T %v, want a timeout", err, err)
	}
	for timeout, want := range map[time.Duration]time.Duration{120 * time.Second: 2 * time.Second, time.Second: time.Second, -time.Second: -time.Second} {
		if got := dialBound(timeout); got != want {
			t.Errorf("dialBound(%v) = %v, want %v", timeout, got, want)
		}
	}
}

func TestErrorsSayWhatTheyAre(t *testing.T) {
	if e := (&badAnswerError{reason: "r"}); e.Error() != "r" {
		t.Error(e.Error())
	}
	if e := (&unreachableError{reason: "u"}); e.Error() != "u" {
		t.Error(e.Error())
	}
}

// An answer that stops or goes wrong after its status line carries that line's code: a 2xx is a
// request stewardd carried out. Before a status line (or with a malformed one), none.
func TestAnAnswerLostAfterItsStatusLineKeepsItsStatus(t *testing.T) {
	for raw, want := range map[string]int{
		ok200 + "Content-Length: 100\r\n\r\n{\"cni":                        200,
		ok200 + "Transfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n0\r\n\r\n": 200,
		ok200 + "Content-Length: 2\r\n":                                    200,
		"HTTP/1.1 201 Created\r\nTransfer-Encoding: gzip\r\n\r\n":          201,
		"HTTP/1.1 100 Continue\r\n\r\n":                                    100,
		"HTTP/1.1 500 X\r\nContent-Length: 9\r\n\r\n{}":                    500,
		"HTTP/1.1 2":      0,
		"garbage\r\n\r\n": 0,
		"HTTP/1.1 200 " + strings.Repeat("r", 70000) + "\r\n\r\n":                       0,
		ok200 + strings.Repeat("X-Pad: "+strings.Repeat("p", 1000)+"\r\n", 70) + "\r\n": 200,
	} {
		_, err := readHTTPAnswer(strings.NewReader(raw))
		if err == nil || statusOf(err) != want {
			t.Errorf("%q: %v, status %d, want an error with status %d", quoteShort([]byte(raw)), err, statusOf(err), want)
		}
	}
	if statusOf(errors.New("other")) != 0 || afterStatus(errors.New("other"), 200).Error() != "other" {
		t.Error("an error of another kind has no status")
	}
}
