// Go's fuzzer on what a hostile runtime or a broken stewardd controls: the environment and the
// netconf (FuzzCall), and the bytes of the answer (FuzzParseResponse). Seeds: the vectors and
// testdata/fuzz/. A short run is part of `npm run test:go`; `npm run fuzz:go` runs longer.
// Whatever the fuzzer finds becomes a vector in shared/vectors/shim.json.

package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
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

func FuzzParseResponse(f *testing.F) {
	for _, seed := range []string{
		"HTTP/1.1 200 OK\r\nx-steward-protocol: 2\r\nContent-Length: 2\r\n\r\n{}",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n2;e\r\n1}\r\n0\r\n\r\n",
		"HTTP/1.0 400 X\r\ncontent-length:\t7\r\n\r\n{\"a\":1}junk",
		"garbage\r\n\r\n",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := parseResponse(raw)
		if err != nil {
			return
		}
		if r.status < 0 || r.status > 999 || len(r.body) > len(raw) {
			t.Fatalf("%+v from %q", r, raw)
		}
		if r.hasProtocol && !utf8.ValidString(r.protocol) {
			t.Fatalf("protocol %q", r.protocol)
		}
	})
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
