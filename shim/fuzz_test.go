// Go's fuzzer on what a hostile runtime or a broken stewardd controls: the environment and the
// netconf (FuzzCall), and the bytes of the answer (FuzzParseResponse). Seeds: the vectors and
// testdata/fuzz/. A short run is part of `npm run test:go`; `npm run fuzz:go` runs longer.
// Whatever the fuzzer finds becomes a vector in shared/vectors/shim.json.

// net/http as FuzzParseResponse's oracle reads Content-Length as Go 1.22 and later do (an empty one
// is refused), not as this module's go line would have it.
//
//go:debug httplaxcontentlength=0

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/textproto"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"
	"unicode/utf8"
)

func FuzzCall(f *testing.F) {
	vf := loadVectors(f)
	nop := strings.NewReplacer()
	for _, v := range vf.Vectors {
		var command, ifname, args string
		_ = json.Unmarshal(v.Env["CNI_COMMAND"], &command)
		_ = json.Unmarshal(v.Env["CNI_IFNAME"], &ifname)
		_ = json.Unmarshal(v.Env["CNI_ARGS"], &args)
		stdin, _ := stdinOf(f, vf, v.Stdin, nop)
		if len(stdin) > 4096 {
			continue
		}
		f.Add(command, "abc123", ifname, args, stdin, uint8(0))
	}
	f.Fuzz(func(t *testing.T, command, containerID, ifname, args string, stdin []byte, answer uint8) {
		e := env{"CNI_COMMAND": command, "CNI_CONTAINERID": containerID, "CNI_NETNS": "/n", "CNI_IFNAME": ifname, "CNI_ARGS": args, "CNI_PATH": "/p"}
		var sent [][]byte
		send := func(socket, route string, body []byte, timeout time.Duration, headers [][2]string) (reply, error) {
			sent = append(sent, body)
			if len(body) > maxRequestBytes || timeout <= 0 || !strings.HasPrefix(socket, "/") || len(socket) > maxSocketPathBytes {
				t.Errorf("sent %d bytes within %v to %q", len(body), timeout, socket)
			}
			if !json.Valid(body) {
				t.Errorf("sent a body that is not JSON: %q", body)
			}
			for _, h := range headers {
				if strings.ContainsAny(h[1], "\r\n") || len(h[1]) > maxHintBytes {
					t.Errorf("header %q", h)
				}
			}
			switch answer % 4 {
			case 0:
				return reply{status: 200, body: []byte(`{}`), protocol: "2", hasProtocol: true}, nil
			case 1:
				return reply{status: 400, body: stdin, protocol: "2", hasProtocol: true}, nil
			case 2:
				return reply{}, &unreachableError{reason: "ECONNREFUSED"}
			}
			return reply{}, &unreachableError{reason: "timed out", timeout: true}
		}
		spool := func(dir, id string, body []byte) (string, error) { return dir, nil }
		out, code := run(input{env: e, stdin: stdin, elapsed: func() time.Duration { return 0 }}, send, spool)
		if code != 0 && code != 1 {
			t.Fatalf("exit code %d", code)
		}
		if bytes.Contains(out, []byte("unexpected error")) {
			t.Fatalf("the shim failed inside: %s", out)
		}
		if code == 1 && (answer%4 != 1 || len(sent) == 0) {
			var e struct {
				Code *float64 `json:"code"`
				Msg  *string  `json:"msg"`
			}
			if json.Unmarshal(out, &e) != nil || e.Code == nil || e.Msg == nil {
				t.Fatalf("not a CNI error: %q", out)
			}
		}
		if command == "DEL" && code == 1 && (bytes.Contains(bytes.ToLower(out), []byte("not found")) || bytes.Contains(bytes.ToLower(out), []byte("no such file or directory"))) {
			t.Fatalf("a DEL failure reads as success: %s", out)
		}
		if !utf8.Valid(out) && !(answer%4 == 1 && len(sent) > 0) {
			t.Fatalf("stdout is not UTF-8: %q", out)
		}
	})
}

// FuzzParseResponse: the shim's reading of an answer (readHTTPAnswer) against net/http's
// ReadResponse, the oracle (net/http in a test file costs the binary nothing). Where both take the
// bytes for an answer, the status, the body and the protocol header agree. Where only one does,
// the difference must be one of the deliberate ones below, each checked on its own grounds, not
// by trusting either side's verdict. The same bytes handed over one at a time read the same.
func FuzzParseResponse(f *testing.F) {
	for _, c := range answerCases {
		// The cases over 1 KiB stay in TestReadAnswer: as seeds, minimizing the inputs the fuzzer
		// grows from them takes most of a short run.
		if len(c.raw) <= 1024 {
			f.Add([]byte(c.raw))
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		q := quoteShort(raw)
		mine, err := readHTTPAnswer(bytes.NewReader(raw))
		again, errAgain := readHTTPAnswer(iotest.OneByteReader(bytes.NewReader(raw)))
		if fmt.Sprintf("%#v %v", mine, err) != fmt.Sprintf("%#v %v", again, errAgain) {
			t.Fatalf("%s: %d %s %v at once, %d %s %v byte by byte", q, mine.status, quoteShort(mine.body), err,
				again.status, quoteShort(again.body), errAgain)
		}
		line, header, rest, headOK := splitHead(raw)
		var isBad bool
		if err != nil {
			var u *unreachableError
			var b *badAnswerError
			isBad = errors.As(err, &b)
			if !isBad && !errors.As(err, &u) {
				t.Fatalf("%s: error of type %T", q, err)
			}
			if lower := strings.ToLower(err.Error()); strings.Contains(lower, "not found") || strings.Contains(lower, "no such file or directory") {
				t.Fatalf("%s: reason %q", q, err)
			}
		} else if !headOK || !strictStatusLine(line) || mine.status < 200 || mine.status > 599 || len(mine.body) > maxAnswerBytes {
			t.Fatalf("%s: taken as %d %s", q, mine.status, quoteShort(mine.body))
		}

		if !httpIsTheOracle {
			return
		}
		resp, herr := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), &http.Request{Method: "POST"})
		var hbody []byte
		if herr == nil {
			hbody, herr = io.ReadAll(resp.Body)
		}
		switch {
		case err == nil && herr == nil:
			want, has := "", false
			if v := resp.Header.Values("X-Steward-Protocol"); len(v) > 0 {
				want, has = strings.Trim(v[0], " \t"), true
			}
			if mine.status != resp.StatusCode || !bytes.Equal(mine.body, hbody) || mine.protocol != want || mine.hasProtocol != has {
				t.Fatalf("%s: %d %s protocol %q/%v; net/http %d %s protocol %q/%v", q, mine.status, quoteShort(mine.body),
					mine.protocol, mine.hasProtocol, resp.StatusCode, quoteShort(hbody), want, has)
			}

		case err == nil:
			// Taken here, refused by net/http.
			msg := herr.Error()
			switch {
			case strings.Contains(msg, "too much non-data") && len(rest) > 16*1024:
				// net/http refuses chunks whose framing outweighs their data by 16 KiB; here the
				// bound and maxAnswerBytes limit what such an answer costs.
			case strings.Contains(msg, "chunk length too large") && hexRun17.Match(rest):
				// net/http refuses a chunk-size of more than 16 hex digits even when they are
				// leading zeros; here its value is what counts.
			case strings.Contains(msg, "invalid byte in chunk length") && bwsBeforeExt.Match(rest):
				// RFC 9112 §7.1.1: BWS before a chunk extension's ";", which a recipient must
				// parse (RFC 9110 §5.6.3); net/http refuses it.
			case (strings.Contains(msg, "suspiciously long trailer") || strings.Contains(msg, "unexpected EOF reading trailer")) &&
				(len(rest) > 4000 || bareLF.Match(rest)):
				// net/http wants the trailer section's CRLF CRLF within its 4 KiB buffer; here
				// trailers are field lines as in the head (a bare LF ends one, RFC 9112 §2.2),
				// within maxHeadBytes.
			case strings.Contains(msg, "bad trailer key") && header["Trailer"] != nil:
				// net/http checks the names the Trailer field announces; trailers are dropped here.
			default:
				t.Fatalf("%s: taken as %d %s, net/http refuses it: %v", q, mine.status, quoteShort(mine.body), herr)
			}

		case herr == nil:
			// Refused here, taken by net/http: always as a bad answer (net/http read it whole).
			why := err.Error()
			switch {
			case !isBad:
				t.Fatalf("%s: no answer (%v), net/http takes it: %d %s", q, err, resp.StatusCode, quoteShort(hbody))
			case resp.StatusCode < 200 || resp.StatusCode > 599:
				// stewardd sends no interim answer: a 1xx is refused, not skipped; nor a status
				// outside 200-599.
			case !strictStatusLine(line) && why == whyStatusLine:
				// RFC 9112 §4's status-line exactly: net/http takes more spaces, no space before an
				// empty reason, control characters in the reason, any HTTP/x.y.
			case resp.ProtoMinor == 0 && header["Transfer-Encoding"] != nil && why == whyCodingIn10:
				// RFC 9112 §6.1: an HTTP/1.0 answer with Transfer-Encoding is faulty framing;
				// net/http ignores the field.
			case owsAfterSize.Match(rest) && why == whyChunkLine:
				// White space after a chunk-size without an extension is not in RFC 9112 §7.1's
				// grammar; net/http trims it.
			case len(raw) > maxHeadBytes && (why == whyHeadTooLong || why == whyTrailerTooLong):
				// The head and the trailers are bounded here.
			case len(hbody) > maxAnswerBytes && why == whyTooLong:
			default:
				t.Fatalf("%s: refused (%v), net/http takes it: %d %s", q, err, resp.StatusCode, quoteShort(hbody))
			}
		}
	})
}

// httpIsTheOracle: the differences listed in FuzzParseResponse are those of net/http as of Go
// 1.26, the project's toolchain. An older Go's (Debian's golang-go) reads some of these bytes
// otherwise (an empty Content-Length, a bare LF in a chunked body): the shim's reading is then
// checked on its own, not against it.
var httpIsTheOracle = goMinor(runtime.Version()) >= 26

// goMinor: N of a "go1.N…" version; a development build counts as the newest.
func goMinor(version string) int {
	rest := strings.TrimPrefix(version, "go1.")
	if rest == version {
		return math.MaxInt32
	}
	n := 0
	for _, c := range rest {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}

var (
	hexRun17     = regexp.MustCompile(`[0-9a-fA-F]{17}`)
	bwsBeforeExt = regexp.MustCompile(`[0-9a-fA-F][ \t]+;`)
	owsAfterSize = regexp.MustCompile(`[0-9a-fA-F][ \t]+\r\n`)
	bareLF       = regexp.MustCompile(`(^|[^\r])\n`)
	statusLine   = regexp.MustCompile(`^HTTP/1\.[01] [0-9]{3} [\t -~]*$`)
)

// quoteShort quotes raw for a failure message, at most its first 300 bytes.
func quoteShort(raw []byte) string {
	if len(raw) > 300 {
		return strconv.Quote(string(raw[:300])) + "… (" + strconv.Itoa(len(raw)) + " bytes)"
	}
	return strconv.Quote(string(raw))
}

// strictStatusLine: RFC 9112 §4's status-line of HTTP/1.0 or 1.1 (reason: HTAB, SP, VCHAR, obs-text).
func strictStatusLine(line string) bool {
	b := []byte(line)
	for i, c := range b {
		if c >= 0x80 {
			b[i] = 'x' // obs-text; the pattern reads runes, not bytes
		}
	}
	return statusLine.Match(b)
}

// splitHead reads raw's status line and header section as net/textproto does, and returns what
// follows them.
func splitHead(raw []byte) (line string, header textproto.MIMEHeader, rest []byte, ok bool) {
	src := bytes.NewReader(raw)
	br := bufio.NewReader(src)
	tp := textproto.NewReader(br)
	line, err := tp.ReadLine()
	if err != nil {
		return "", nil, nil, false
	}
	if header, err = tp.ReadMIMEHeader(); err != nil {
		return "", nil, nil, false
	}
	return line, header, raw[len(raw)-src.Len()-br.Buffered():], true
}

// FuzzTopLevel: the shim's own reading of the netconf's top level (no copies) agrees with
// encoding/json's on every valid object: the same keys, the same value bytes, the last of a
// repeated key.
func FuzzTopLevel(f *testing.F) {
	for _, seed := range []string{
		`{"cniVersion":"1.0.0","socket":"/s","socket":"/t","x":{"a":[1,"]}"]}}`,
		` { "\u0073ocket" : null , "timeouts" : { "add" : 1 } } `,
		`{}`, `[]`, `"x"`, `{"a":"\"}"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		got, ok := topLevel(b)
		var want map[string]json.RawMessage
		err := json.Unmarshal(b, &want)
		if !ok {
			if err == nil && want != nil {
				t.Fatalf("%q: not read as an object", b)
			}
			return
		}
		if err != nil || len(got) != len(want) {
			t.Fatalf("%q: %v vs %v (%v)", b, got, want, err)
		}
		for k, v := range want {
			if !bytes.Equal(got[k], v) {
				t.Fatalf("%q: key %q: %q, want %q", b, k, got[k], v)
			}
		}
	})
}
