// Unit tests of what the vectors cannot reach through a socket: the injected sender's and
// spooler's calls, the defaults a DEL falls back to, the JSON writer, the answer parser's edges,
// and the process wiring (environment, stdout).

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

type sendCall struct {
	socket  string
	timeout time.Duration
	headers [][2]string
}

func fakeSend(calls *[]sendCall, r reply, err error) sender {
	return func(socket, route string, body []byte, timeout time.Duration, headers [][2]string) (reply, error) {
		*calls = append(*calls, sendCall{socket, timeout, headers})
		return r, err
	}
}

func fakeSpool(dirs *[]string, err error) spooler {
	return func(dir, containerID string, body []byte) (string, error) {
		*dirs = append(*dirs, dir)
		return dir + "/" + containerID + ".json", err
	}
}

var delEnv = env{"CNI_COMMAND": "DEL", "CNI_CONTAINERID": "abc", "CNI_IFNAME": "eth0", "CNI_PATH": "/opt/cni/bin"}

func zero() time.Duration { return 0 }

func TestADelFallsBackToTheDefaultsOfTheShimsOwnKeys(t *testing.T) {
	// A DEL refused for them would fail on every retry and pin the sandbox.
	for _, conf := range []string{
		`{"cniVersion":"1.0.0","socket":"relative.sock","spoolDir":"spool","timeouts":{"delete":5000}}`,
		`{"cniVersion":"1.0.0","socket":5,"spoolDir":"/tmp/sp\u0000ool","timeouts":[1]}`,
		`{"cniVersion":"1.0.0"}`,
	} {
		var calls []sendCall
		var dirs []string
		out, code := run(input{env: delEnv, stdin: []byte(conf), elapsed: zero},
			fakeSend(&calls, reply{}, &unreachableError{reason: "ECONNREFUSED"}), fakeSpool(&dirs, nil))
		if code != 0 || len(out) != 0 {
			t.Fatalf("%s: %d %s", conf, code, out)
		}
		if len(calls) != 1 || calls[0].socket != defaultSocket || calls[0].timeout != delBound {
			t.Errorf("%s: sent %+v", conf, calls)
		}
		if len(dirs) != 1 || dirs[0] != defaultSpoolDir {
			t.Errorf("%s: spooled to %v", conf, dirs)
		}
	}
}

func TestTheNetconfsSocketAndBoundAreUsed(t *testing.T) {
	var calls []sendCall
	env := env{"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "abc", "CNI_NETNS": "/n", "CNI_IFNAME": "eth0", "CNI_PATH": "/p"}
	_, code := run(input{env: env, stdin: []byte(`{"socket":"/x/s.sock","timeouts":{"add":2500,"add":3000,"del":7}}`), elapsed: zero},
		fakeSend(&calls, reply{status: 200, body: []byte("{}"), hasProtocol: true, protocol: "2"}, nil), nil)
	if code != 0 || calls[0].socket != "/x/s.sock" || calls[0].timeout != 3*time.Second {
		t.Errorf("%d %+v", code, calls)
	}
	last := calls[0].headers[len(calls[0].headers)-1]
	if last != [2]string{"x-steward-protocol", "2"} {
		t.Errorf("headers %v", calls[0].headers)
	}
}

func TestAnErrorFromTheSenderOfNeitherKindIsCode104AndNotSpooled(t *testing.T) {
	// A bug in the shim's own client: stewardd was not heard from, and spooling would hide the bug.
	var calls []sendCall
	var dirs []string
	out, code := run(input{env: delEnv, stdin: []byte(`{"cniVersion":"0.4.0"}`), elapsed: zero},
		fakeSend(&calls, reply{}, errors.New("bug in client: not found")), fakeSpool(&dirs, nil))
	if code != 1 || !strings.Contains(string(out), `"code":104`) || !strings.Contains(string(out), "not-found") {
		t.Errorf("%d %s", code, out)
	}
	if len(dirs) != 0 {
		t.Errorf("spooled %v", dirs)
	}
}

func TestSTATUSCountsTheTimeSinceTheProcessStarted(t *testing.T) {
	for _, c := range []struct {
		elapsed, want time.Duration
	}{{0, statusBound}, {700 * time.Millisecond, 50 * time.Millisecond}, {2 * time.Second, time.Millisecond}, {-time.Second, statusBound}} {
		b, err := commandBound("STATUS", nil, c.elapsed)
		if err != nil || b.remaining != c.want || b.label != "the STATUS bound of 750 ms" {
			t.Errorf("%v: %+v %v", c.elapsed, b, err)
		}
	}
	for command, want := range map[string]time.Duration{"STATUS": statusBound, "VERSION": statusBound, "DEL": delBound, "ADD": addBound, "": addBound} {
		if got := stdinBound(env{"CNI_COMMAND": command}, 0); got.remaining != want {
			t.Errorf("stdin bound for %q: %v", command, got)
		}
	}
	// The message names the bound, not what was left of it when stdin was read.
	if got := string(stdinNotClosed(stdinBound(env{"CNI_COMMAND": "STATUS"}, 749600*time.Microsecond))); !strings.Contains(got, "within the STATUS bound of 750 ms") {
		t.Error(got)
	}
}

func TestFailureSafeRewritesWhatIsNotACNIError(t *testing.T) {
	if got := string(failureSafe([]byte("plugin NOT FOUND: No Such File Or Directory"))); got != "plugin not-found: ENOENT" {
		t.Error(got)
	}
	got := string(failureSafe([]byte(`{"code":3,"msg":"x not found","details":""}`)))
	if got != `{"cniVersion":"1.1.0","code":3,"msg":"x not-found"}` {
		t.Error(got)
	}
	if got := failureSafeText("nothing here"); got != "nothing here" {
		t.Error(got)
	}
}

func TestErrorsAreWrittenAsJSONWithoutHTMLEscapes(t *testing.T) {
	e := &cniError{Code: 7, Msg: "a\"\\\n\t\x01 é \xff <&>", Details: "d"}
	want := `{"cniVersion":"1.0.0","code":7,"msg":"a\"\\\n\t\u0001 é \ufffd <&>","details":"d"}`
	if got := string(e.encode("1.0.0")); got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
	if got := string((&cniError{Code: 3, Msg: "m"}).encode("0.4.0")); got != `{"cniVersion":"0.4.0","code":3,"msg":"m"}` {
		t.Errorf("no details: %s", got)
	}
	if e.Error() != e.Msg {
		t.Error("Error()")
	}
}

func TestADaemonErrorIsAnObjectWithAnIntegerCodeAndAStringMsg(t *testing.T) {
	for body, want := range map[string]bool{
		`{"code":3,"msg":"m","details":"d","cniVersion":"1.0.0"}`: true,
		`{"code":3,"msg":"m","details":5}`:                        true,
		`{"code":3.5,"msg":"m"}`:                                  false,
		`{"code":"3","msg":"m"}`:                                  false,
		`{"CODE":3,"msg":"m"}`:                                    false,
		`{"code":3,"msg":null}`:                                   false,
		`null`:                                                    false,
		`[1]`:                                                     false,
	} {
		e, _, ok := daemonError([]byte(body))
		if ok != want || (ok && (e.Code != 3 || e.Msg != "m")) {
			t.Errorf("%s: %v %+v", body, ok, e)
		}
	}
	e, v, _ := daemonError([]byte(`{"code":3,"msg":"m","details":"d","cniVersion":"1.0.0"}`))
	if e.Details != "d" || v != "1.0.0" {
		t.Errorf("%+v %q", e, v)
	}
}

func TestClipCutsLongTextSayingHowMuch(t *testing.T) {
	if got := clip("abcdef", 4); got != "abcd… [2 more bytes cut]" {
		t.Error(got)
	}
	if got := clip("abé", 3); got != "ab… [2 more bytes cut]" {
		t.Error(got)
	}
	if got := clip("abc", 4); got != "abc" {
		t.Error(got)
	}
}

func TestNamesAndIfnames(t *testing.T) {
	for name, ok := range map[string]bool{"a": true, "a_b.c-d": true, "-a": false, "a b": false, "é": false} {
		if (checkName(name) == "") != ok {
			t.Errorf("name %q", name)
		}
	}
	for name, ok := range map[string]bool{"eth0": true, ".": false, "a\u3000b": false, "a\u2003b": false, "a\ufeffb": false, "a\u0085b": false, "a\u009bb": false, "a\u00a0b": false, "a\u00a1b": true, "e\x01": false, "": false} {
		if (checkIfName(name) == "") != ok {
			t.Errorf("ifname %q", name)
		}
	}
	if required("VERSION") != nil {
		t.Error("VERSION needs nothing")
	}
}

func TestUnreachableNamesTheErrno(t *testing.T) {
	for _, e := range []syscall.Errno{syscall.ENOENT, syscall.ECONNREFUSED, syscall.EACCES, syscall.EPERM, syscall.EAGAIN,
		syscall.ECONNRESET, syscall.EPIPE, syscall.ENOTDIR, syscall.ELOOP, syscall.ENAMETOOLONG, syscall.ENOTSOCK,
		syscall.EPROTOTYPE, syscall.ETIMEDOUT, syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.EINVAL} {
		u := unreachable(&os.SyscallError{Syscall: "connect", Err: e})
		if u.reason == "" || u.reason != errnoName(e) || !strings.HasPrefix(u.reason, "E") {
			t.Errorf("%v: %q", e, u.reason)
		}
	}
	if u := unreachable(&os.SyscallError{Syscall: "x", Err: syscall.EXDEV}); u.reason != syscall.EXDEV.Error() {
		t.Error(u.reason)
	}
	if u := unreachable(os.ErrDeadlineExceeded); !u.timeout {
		t.Error("deadline")
	}
	if u := unreachable(errors.New("odd")); u.reason != "odd" || u.Error() != "odd" {
		t.Error(u.reason)
	}
}

func TestTheDialHasADeadline(t *testing.T) {
	dir, _ := os.MkdirTemp("", "stu")
	defer os.RemoveAll(dir)
	_, err := postUnix(filepath.Join(dir, "none.sock"), "/v1/cni", nil, time.Second, nil)
	var u *unreachableError
	if !errors.As(err, &u) || u.reason != "ENOENT" {
		t.Errorf("%v", err)
	}
}

func TestEnvironTakesTheFirstOfARepeatedName(t *testing.T) {
	e := environ([]string{"A=1", "A=2", "B=", "=x", "C"})
	if len(e) != 2 || e["A"] != "1" || e["B"] != "" {
		t.Errorf("%v", e)
	}
}

func TestWriteStdoutWritesEverythingToANonBlockingPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fd := int(w.Fd())
	if err := syscall.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	data := []byte(strings.Repeat("x", 1<<20))
	got := make(chan int)
	go func() {
		n := 0
		buf := make([]byte, 4096)
		for {
			time.Sleep(time.Microsecond)
			m, err := r.Read(buf)
			n += m
			if err != nil {
				got <- n
				return
			}
		}
	}()
	writeAll(fd, data)
	w.Close()
	if n := <-got; n != len(data) {
		t.Errorf("read %d of %d", n, len(data))
	}
}

func TestWriteStdoutToAClosedPipeReturnsAtTheFirstFailedWrite(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	defer w.Close()
	// EPIPE: nothing to do and nothing to wait for (the process is not killed by SIGPIPE either: the
	// binary's test is TestTheBinaryWritingToAClosedStdoutExitsWithItsCode). A writeAll that retried
	// or waited for the pipe to drain would never return.
	done := make(chan struct{})
	go func() {
		writeAll(int(w.Fd()), bytes.Repeat([]byte("answer"), 100000))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("writeAll to a pipe with no reader did not return within 5 s")
	}
	// The descriptor is still the caller's: writeAll does not close it.
	if _, err := syscall.Write(int(w.Fd()), []byte("x")); err != syscall.EPIPE {
		t.Errorf("a later write: %v, want EPIPE on the same open descriptor", err)
	}
}

func TestSpoolFailsWholeWhenItsDirectoryCannotBeMade(t *testing.T) {
	dir, _ := os.MkdirTemp("", "sts")
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "f")
	_ = os.WriteFile(file, nil, 0o600)
	if _, err := spoolRequest(file+"/spool", "c", []byte("{}")); err == nil {
		t.Error("spooled under a file")
	}
	if _, err := spoolRequest("/proc/steward-no-such/spool", "c", []byte("{}")); err == nil {
		t.Error("spooled under /proc")
	}
	p, err := spoolRequest(dir+"//a/./b", "c", []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(filepath.Join(dir, "a"))
	if st.Mode().Perm() != 0o700 || !strings.HasSuffix(p, ".json") {
		t.Errorf("%v %s", st.Mode(), p)
	}
	if b := randomBytes(); b == [4]byte{} {
		t.Log("four zero random bytes (possible, unlikely)")
	}
}

func TestFirstChars(t *testing.T) {
	if firstChars("héllo", 2) != "hé" || firstChars("hi", 5) != "hi" {
		t.Error("firstChars")
	}
}

func TestTopLevelKeysAreMatchedExactlyAndTheLastOneWins(t *testing.T) {
	conf, err := decodeNetconf([]byte(`{"SOCKET":"/upper","\u0073ocket":"/first","socket":"/last","name":"n"}`))
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := conf.str("socket"); s != "/last" {
		t.Errorf("socket %q", s)
	}
	if _, ok := conf.keys["Socket"]; ok {
		t.Error("case-folded key")
	}
	for _, in := range []string{"null", "5", `"x"`, "[{}]"} {
		if _, err := decodeNetconf([]byte(in)); err == nil || err.Code != codeDecodeFailure {
			t.Errorf("%s: %v", in, err)
		}
	}
}

func TestA200IsPrintedOnlyWhenItIsWhatTheCommandAnswers(t *testing.T) {
	add := env{"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "abc", "CNI_NETNS": "/n", "CNI_IFNAME": "eth0", "CNI_PATH": "/p"}
	check := env{"CNI_COMMAND": "CHECK", "CNI_CONTAINERID": "abc", "CNI_NETNS": "/n", "CNI_IFNAME": "eth0", "CNI_PATH": "/p"}
	for _, c := range []struct {
		name string
		e    env
		body string
		code int
	}{
		{"ADD with a result", add, `{"cniVersion":"1.0.0"}`, 0},
		{"ADD with nothing", add, ``, 1},
		{"ADD with an array", add, `[1]`, 1},
		{"ADD with text", add, `ok`, 1},
		{"CHECK with nothing (the spec's success)", check, ``, 0},
		{"CHECK with an object", check, `{}`, 0},
		{"CHECK with text", check, `ok`, 1},
	} {
		var calls []sendCall
		out, code := run(input{env: c.e, stdin: []byte(`{"cniVersion":"1.0.0"}`), elapsed: zero},
			fakeSend(&calls, reply{status: 200, body: []byte(c.body), protocol: "2", hasProtocol: true}, nil), fakeSpool(&[]string{}, nil))
		if code != c.code || (code == 0 && string(out) != c.body) || (code == 1 && !strings.Contains(string(out), `"code":104`)) {
			t.Errorf("%s: %d %s", c.name, code, out)
		}
	}
}

func TestTheAboutTextNamesTheSocketAndEveryVersionOnce(t *testing.T) {
	if got := joinVersions(); got != "0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0" {
		t.Errorf("joinVersions: %q", got)
	}
	about := aboutText()
	if !strings.HasPrefix(about, "steward "+version+": the CNI plugin of cni-steward.") ||
		!strings.Contains(about, "(default /run/steward/stewardd.sock). CNI spec versions: 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0.\n") ||
		!strings.HasSuffix(about, "  stewardd status       what stewardd holds (on the node, as root)\n") {
		t.Errorf("about:\n%s", about)
	}
	if v := versionText(); !strings.HasPrefix(v, "steward "+version+" (go1.") || !strings.HasSuffix(v, ")\n") {
		t.Errorf("version: %q", v)
	}
}

// An environment already known to be wrong is answered code 4 without waiting for a stdin its
// caller never closes (a hand-run `env -i steward` on a terminal): stdin only lends the error its
// cniVersion, so it is waited for at most badEnvStdinWait, not the command's stdin bound.
func TestABadEnvironmentIsAnsweredWithoutWaitingForAnOpenStdin(t *testing.T) {
	noSend := func(string, string, []byte, time.Duration, [][2]string) (reply, error) {
		t.Fatal("nothing may be sent")
		return reply{}, nil
	}
	noSpool := func(string, string, []byte) (string, error) { t.Fatal("nothing may be spooled"); return "", nil }
	for _, c := range []struct {
		env   env
		stdin string
		want  string
	}{
		// A whole netconf, its pipe left open: it lends the error its cniVersion.
		{env{"CNI_COMMAND": "ADD"}, `{"cniVersion":"0.4.0","name":"n"}`, `"cniVersion":"0.4.0"`},
		{env{"CNI_COMMAND": "add", "CNI_PATH": "/p"}, `{"cniVersion":"0.4.0","name":"n"}`, `"cniVersion":"0.4.0"`},
		// Half a netconf that never ends: the shim's own version.
		{env{}, `{"cniVersion":"0.4.0","na`, `"cniVersion":"1.1.0"`},
	} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(c.stdin)); err != nil {
			t.Fatal(err)
		}
		done := make(chan []byte, 1)
		go func() {
			out, code := call(c.env, int(r.Fd()), func() time.Duration { return 0 }, noSend, noSpool)
			if code != 1 {
				t.Errorf("%v: exit %d", c.env, code)
			}
			done <- out
		}()
		select {
		case out := <-done:
			if !strings.Contains(string(out), `"code":4`) || !strings.Contains(string(out), c.want) {
				t.Errorf("%v: %s, want code 4 with %s", c.env, out, c.want)
			}
		case <-time.After(10 * time.Second): // the stdin bound of an ADD is 120 s
			t.Fatalf("%v: still waiting for stdin", c.env)
		}
		r.Close()
		w.Close()
	}
}

// STATUS: a stewardd whose answer the shim cannot use is a plugin not available (50) to the runtime,
// as every other way stewardd fails to serve; an ADD keeps the shim's own code (104).
func TestSTATUSReadsAnUnusableAnswerAsNotAvailable(t *testing.T) {
	for _, c := range []struct {
		name string
		send func(string, string, []byte, time.Duration, [][2]string) (reply, error)
	}{
		{"a malformed HTTP answer", func(string, string, []byte, time.Duration, [][2]string) (reply, error) {
			return reply{}, &badAnswerError{reason: "garbage status line"}
		}},
		{"HTTP 500 without a CNI error", func(string, string, []byte, time.Duration, [][2]string) (reply, error) {
			return reply{status: 500, body: []byte("oops"), protocol: strconv.Itoa(protocolVersion), hasProtocol: true}, nil
		}},
	} {
		for command, want := range map[string]string{"STATUS": `"code":50`, "ADD": `"code":104`} {
			e := env{"CNI_COMMAND": command, "CNI_CONTAINERID": "c", "CNI_NETNS": "/n", "CNI_IFNAME": "eth0", "CNI_PATH": "/p"}
			in := input{env: e, stdin: []byte(`{"cniVersion":"1.1.0","name":"n"}`), elapsed: func() time.Duration { return 0 },
				restart: func(string) (time.Duration, bool) { return 0, false }, sleep: func(time.Duration) {}}
			out, code := run(in, c.send, func(string, string, []byte) (string, error) { return "", nil })
			if code != 1 || !strings.Contains(string(out), want) {
				t.Errorf("%s, %s: exit %d %s, want %s", c.name, command, code, out, want)
			}
		}
	}
}

// shortTempDir: a temp dir whose socket path fits a Unix socket's 107 bytes, whatever the test's name.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sts")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// delOf finds the DEL among the raw requests a recordingDaemon received: its hint headers and body.
func delOf(t *testing.T, conns [][]byte) (head string, body map[string]map[string]any) {
	t.Helper()
	for _, c := range conns {
		end := bytes.Index(c, []byte("\r\n\r\n"))
		if end < 0 || !bytes.Contains(c[:end], []byte("\r\nx-cni-command: DEL\r\n")) {
			continue
		}
		if err := json.Unmarshal(c[end+4:], &body); err != nil {
			t.Fatalf("the DEL's body: %v: %q", err, c[end+4:])
		}
		return string(c[:end]), body
	}
	return "", nil
}

// An ADD answered with a 200 status line was carried out by stewardd (delegates ran, journal
// committed), whatever became of the rest of the answer. The runtime, told it failed, sends no DEL
// after it, so the shim sends the DEL (or spools it) for the same container and ifname, and does
// not call a stewardd that answered unreachable.
func TestAnADDAnswered200WhoseAnswerIsLostIsUndone(t *testing.T) {
	const cutOff = "HTTP/1.1 200 OK\r\nx-steward-protocol: 2\r\nContent-Length: 100\r\n\r\n{\"cni"
	const delAnswered = "HTTP/1.1 200 OK\r\nx-steward-protocol: 2\r\nContent-Length: 0\r\n\r\n"
	for _, c := range []struct {
		name    string
		answers []string
		code    float64
		msg     string
		spooled bool
	}{
		{"its body cut off", []string{cutOff, delAnswered}, codeTryAgainLater,
			"answered the ADD with HTTP 200, but the answer was cut off (connection closed after 5 of 100 body bytes); the ADD it carried out was undone (DEL answered); try again later", false},
		{"broken chunk framing", []string{ok200 + "x-steward-protocol: 2\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n0\r\n\r\n", delAnswered}, codeInternal,
			"answered the ADD with HTTP 200, but not with a usable HTTP answer: " + whyChunkEnd + "; the ADD it carried out was undone (DEL answered)", false},
		{"a body that is not a JSON object", []string{ok200 + "x-steward-protocol: 2\r\nContent-Length: 2\r\n\r\nok", delAnswered}, codeInternal,
			"answered the ADD with 200 and a body that is not a JSON object; the ADD it carried out was undone (DEL answered)", false},
		{"its body cut off, and the DEL's too", []string{cutOff}, codeTryAgainLater,
			"the ADD it carried out is undone by a spooled DEL when stewardd next reads its spool; try again later", true},
	} {
		dir := shortTempDir(t)
		socket := filepath.Join(dir, "s.sock")
		d := startRecordingDaemon(t, socket, c.answers...)
		e := env{"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "abc", "CNI_NETNS": "/n", "CNI_IFNAME": "eth1", "CNI_PATH": "/p"}
		conf := `{"cniVersion":"1.0.0","name":"n","socket":"` + socket + `","spoolDir":"` + dir + `/spool"}`
		// The undo's DEL is on disk before it is sent: a runtime that kills the shim meanwhile leaves it.
		spooledAtDel := -1
		send := func(socket, route string, body []byte, timeout time.Duration, headers [][2]string) (reply, error) {
			if bytes.Contains(body, []byte(`"CNI_COMMAND":"DEL"`)) {
				files, _ := filepath.Glob(filepath.Join(dir, "spool", "*.json"))
				spooledAtDel = len(files)
			}
			return postUnix(socket, route, body, timeout, headers)
		}
		out, code := run(input{env: e, stdin: []byte(conf), elapsed: zero, unspool: os.Remove}, send, spoolRequest)
		var got cniError
		if code == 0 || json.Unmarshal(out, &got) != nil || float64(got.Code) != c.code || !strings.Contains(got.Msg, c.msg) || strings.Contains(got.Msg, "unreachable") {
			t.Errorf("%s: exit %d %s, want code %v with %q", c.name, code, out, c.code, c.msg)
		}
		if spooledAtDel != 1 {
			t.Errorf("%s: %d DELs were spooled when the undo's DEL was sent, want 1", c.name, spooledAtDel)
		}
		head, body := delOf(t, d.received())
		if !strings.Contains(head, "\r\nx-cni-containerid: abc\r\n") || !strings.Contains(head, "\r\nx-cni-ifname: eth1\r\n") ||
			body["env"]["CNI_COMMAND"] != "DEL" || body["env"]["CNI_CONTAINERID"] != "abc" || body["env"]["CNI_IFNAME"] != "eth1" {
			t.Errorf("%s: no DEL of the same attachment was sent: %q %v", c.name, head, body)
		}
		files, _ := filepath.Glob(filepath.Join(dir, "spool", "*.json"))
		if len(files) != map[bool]int{true: 1, false: 0}[c.spooled] {
			t.Errorf("%s: spooled %v", c.name, files)
		}
		for _, f := range files {
			var spooled map[string]map[string]any
			if b, _ := os.ReadFile(f); json.Unmarshal(b, &spooled) != nil || spooled["env"]["CNI_COMMAND"] != "DEL" ||
				spooled["env"]["CNI_CONTAINERID"] != "abc" || spooled["env"]["CNI_IFNAME"] != "eth1" {
				t.Errorf("%s: spooled %s", c.name, b)
			}
		}
	}
}

// A DEL that got an answer the shim cannot use (an interim 1xx, broken framing) may or may not have
// been carried out: it is spooled as one that got no answer (a repeat DEL is harmless), not failed.
func TestADELAnsweredUnusablyIsSpooledNotFailed(t *testing.T) {
	for _, c := range []struct{ name, answer string }{
		{"an interim 100 Continue, then the close", "HTTP/1.1 100 Continue\r\n\r\n"},
		{"broken chunk framing", ok200 + "x-steward-protocol: 2\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n0\r\n\r\n"},
	} {
		dir := shortTempDir(t)
		socket := filepath.Join(dir, "s.sock")
		startRecordingDaemon(t, socket, c.answer)
		conf := `{"cniVersion":"1.0.0","name":"n","socket":"` + socket + `","spoolDir":"` + dir + `/spool"}`
		out, code := run(input{env: delEnv, stdin: []byte(conf), elapsed: zero}, postUnix, spoolRequest)
		files, _ := filepath.Glob(filepath.Join(dir, "spool", "*.json"))
		if code != 0 || len(out) != 0 || len(files) != 1 {
			t.Errorf("%s: exit %d %s, spooled %v; want 0, nothing, one DEL spooled", c.name, code, out, files)
		}
	}
	// Neither usable nor spooled: the runtime is told, failure-safe, and retries.
	var dirs []string
	out, code := run(input{env: delEnv, stdin: []byte(`{"cniVersion":"1.0.0"}`), elapsed: zero},
		fakeSend(&[]sendCall{}, reply{}, &badAnswerError{reason: whyChunkEnd}), fakeSpool(&dirs, errors.New("open x: no such file or directory")))
	if code != 1 || !strings.Contains(string(out), whyChunkEnd) || !strings.Contains(string(out), "could not be spooled") ||
		strings.Contains(string(out), "no such file") || len(dirs) != 1 {
		t.Errorf("spool failing: exit %d %s", code, out)
	}
}

// An ADD whose 200 status line came and the rest of its answer did not within the bound is undone too,
// and the message names the bound.
func TestAnADDWhose200AnswerStoppedAtTheBoundIsUndone(t *testing.T) {
	e := env{"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "abc", "CNI_NETNS": "/n", "CNI_IFNAME": "eth0", "CNI_PATH": "/p"}
	var commands []string
	send := func(_, _ string, body []byte, _ time.Duration, _ [][2]string) (reply, error) {
		var b map[string]map[string]any
		_ = json.Unmarshal(body, &b)
		commands = append(commands, b["env"]["CNI_COMMAND"].(string))
		if len(commands) == 1 {
			return reply{}, &unreachableError{reason: "timed out", timeout: true, status: 200}
		}
		return reply{status: 200, protocol: "2", hasProtocol: true}, nil
	}
	var dirs []string
	out, code := run(input{env: e, stdin: []byte(`{"cniVersion":"1.0.0","name":"n"}`), elapsed: zero}, send, fakeSpool(&dirs, nil))
	if code != 1 || !strings.Contains(string(out), `"code":11`) || !strings.Contains(string(out), "answer was cut off (the rest of it not within the ADD bound of 120000 ms); the ADD it carried out was undone (DEL answered)") {
		t.Errorf("%d %s", code, out)
	}
	if strings.Join(commands, " ") != "ADD DEL" {
		t.Errorf("sent %v", commands)
	}
}

// readStdin on a non-blocking pipe that is empty for now waits for what is written to it.
func TestReadStdinWaitsOnANonBlockingPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fd := int(r.Fd())
	if err := syscall.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		_, _ = w.Write([]byte(`{"a":1}`))
		w.Close()
	}()
	data, closed := readStdin(fd, 1024, 10*time.Second, nil)
	if !closed || string(data) != `{"a":1}` {
		t.Errorf("%q closed %v", data, closed)
	}
}

// Every command's bound counts from the process's start, as STATUS's always did: the time spent
// reading stdin comes off it (an ADD with timeouts.add 2000 whose stdin closed 3 s late waited 2 s
// more, 5 s in all, and an ADD could take 120 s of stdin plus 200 s, past the kubelet's 240 s). An
// expiry still names the whole bound.
func TestTheTimeSpentReadingStdinComesOffTheCommandsBound(t *testing.T) {
	for _, c := range []struct {
		command, timeouts string
		elapsed, want     time.Duration
		label             string
	}{
		{"ADD", `{"add":2000}`, 1500 * time.Millisecond, 500 * time.Millisecond, "the ADD bound of 2000 ms"},
		{"ADD", `{"add":200000}`, 119 * time.Second, 81 * time.Second, "the ADD bound of 200000 ms"},
		{"DEL", `{}`, 10 * time.Second, delBound - 10*time.Second, "the DEL bound of 30000 ms"},
		{"GC", `{}`, 0, checkBound, "the GC bound of 120000 ms"},
	} {
		var calls []sendCall
		e := env{"CNI_COMMAND": c.command, "CNI_CONTAINERID": "abc", "CNI_NETNS": "/n", "CNI_IFNAME": "eth0", "CNI_PATH": "/p"}
		in := input{env: e, stdin: []byte(`{"cniVersion":"1.1.0","name":"n","timeouts":` + c.timeouts + `}`),
			elapsed: func() time.Duration { return c.elapsed }}
		out, code := run(in, fakeSend(&calls, reply{}, &unreachableError{reason: "timed out", timeout: true}),
			func(string, string, []byte) (string, error) { return "", errors.New("no spool") })
		if len(calls) != 1 || calls[0].timeout != c.want {
			t.Errorf("%s %s after %v: sent %+v, want a bound of %v", c.command, c.timeouts, c.elapsed, calls, c.want)
		}
		if code != 1 || !strings.Contains(string(out), "no answer within "+c.label) {
			t.Errorf("%s %s: %d %s, want it to name %s", c.command, c.timeouts, code, out, c.label)
		}
	}
}

// A bound that reading stdin used up is said so, and nothing is sent: stewardd could only carry out an
// ADD the shim no longer waits for. A DEL is spooled, as one stewardd does not answer in time is;
// STATUS still asks (its alive beacon answers for a stewardd that cannot within 1 ms).
func TestABoundUsedUpReadingStdinSendsNothing(t *testing.T) {
	for _, c := range []struct {
		command, timeouts string
		elapsed           time.Duration
		code              int
		msg               string
		sent, spooled     int
	}{
		{"ADD", `{"add":2000}`, 3 * time.Second, 1, `"code":11,"msg":"the ADD bound of 2000 ms was used up reading stdin (3000 ms since the shim started) before stewardd was asked; nothing was sent; try again later"`, 0, 0},
		{"ADD", `{"add":2000}`, 2 * time.Second, 1, `"code":11`, 0, 0},
		{"CHECK", `{"check":5000}`, 6 * time.Second, 1, "the CHECK bound of 5000 ms was used up", 0, 0},
		{"GC", `{}`, checkBound, 1, "the GC bound of 120000 ms was used up", 0, 0},
		{"DEL", `{"del":1000}`, 1500 * time.Millisecond, 0, "", 0, 1},
		{"STATUS", `{}`, statusBound + time.Second, 1, `"code":50`, 1, 0},
	} {
		var calls []sendCall
		var dirs []string
		e := env{"CNI_COMMAND": c.command, "CNI_CONTAINERID": "abc", "CNI_NETNS": "/n", "CNI_IFNAME": "eth0", "CNI_PATH": "/p"}
		in := input{env: e, stdin: []byte(`{"cniVersion":"1.1.0","name":"n","timeouts":` + c.timeouts + `}`),
			elapsed: func() time.Duration { return c.elapsed }}
		out, code := run(in, fakeSend(&calls, reply{}, &unreachableError{reason: "timed out", timeout: true}), fakeSpool(&dirs, nil))
		if code != c.code || !strings.Contains(string(out), c.msg) || len(calls) != c.sent || len(dirs) != c.spooled {
			t.Errorf("%s %s after %v: exit %d %s, sent %d, spooled %d; want exit %d with %s, sent %d, spooled %d",
				c.command, c.timeouts, c.elapsed, code, out, len(calls), len(dirs), c.code, c.msg, c.sent, c.spooled)
		}
	}
	// A DEL that can be neither sent nor spooled: the runtime is told to try again.
	var dirs []string
	e := env{"CNI_COMMAND": "DEL", "CNI_CONTAINERID": "abc", "CNI_NETNS": "/n", "CNI_IFNAME": "eth0", "CNI_PATH": "/p"}
	out, code := run(input{env: e, stdin: []byte(`{"cniVersion":"1.1.0","name":"n"}`), elapsed: func() time.Duration { return delBound }},
		fakeSend(&[]sendCall{}, reply{}, nil), fakeSpool(&dirs, errors.New("disk full")))
	if code != 1 || !strings.Contains(string(out), `"code":11`) || !strings.Contains(string(out), "could not be spooled") {
		t.Errorf("DEL, spool failing: %d %s", code, out)
	}
}

// The same through the process's stdin: closed 300 ms late, an ADD with timeouts.add 1000 has at
// most 700 ms left for stewardd, not 1000.
func TestAStdinClosedLateShortensTheWaitForStewardd(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := w.Write([]byte(`{"cniVersion":"1.1.0","name":"n","timeouts":{"add":1000}}`)); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		w.Close()
	}()
	e := env{"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "abc", "CNI_NETNS": "/n", "CNI_IFNAME": "eth0", "CNI_PATH": "/p"}
	start := time.Now()
	var calls []sendCall
	out, code := call(e, int(r.Fd()), func() time.Duration { return time.Since(start) },
		fakeSend(&calls, reply{}, &unreachableError{reason: "timed out", timeout: true}), nil)
	// At least the 300 ms stdin took came off; a loaded machine may take longer, never less.
	if len(calls) != 1 || calls[0].timeout > 700*time.Millisecond {
		t.Errorf("sent %+v, want at most the 700 ms left of the ADD's 1000", calls)
	}
	if code != 1 || !strings.Contains(string(out), "no answer within the ADD bound of 1000 ms") {
		t.Errorf("%d %s", code, out)
	}
}

// The undo of an ADD carried out though the runtime is told it failed gets a whole DEL bound, however
// much of the ADD's was spent: the ADD's bound and it fit the kubelet's 4 minutes together.
func TestTheUndoOfAnADDHasAWholeDELBound(t *testing.T) {
	var calls []sendCall
	e := env{"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "abc", "CNI_NETNS": "/n", "CNI_IFNAME": "eth0", "CNI_PATH": "/p"}
	in := input{env: e, stdin: []byte(`{"cniVersion":"1.1.0","name":"n"}`), elapsed: func() time.Duration { return 100 * time.Second }}
	out, code := run(in, fakeSend(&calls, reply{status: 200, body: []byte("[]"), hasProtocol: true, protocol: strconv.Itoa(protocolVersion)}, nil),
		func(string, string, []byte) (string, error) { return "", nil })
	if code != 1 || len(calls) != 2 || calls[0].timeout != addBound-100*time.Second || calls[1].timeout != delBound {
		t.Errorf("%d %s: sent %+v", code, out, calls)
	}
}

// stewardd's CNI error is passed on as sent when its code is a whole number from 1 (the spec's,
// steward's own, a delegate's passed through: 50 on ADD too); 0, a code below it or not an integer
// is 104 naming stewardd (50 on STATUS, as any answer of stewardd's it cannot use), its words kept.
func TestAnErrorCodeTheCommandCannotHaveIs104NamingStewardd(t *testing.T) {
	for _, c := range []struct {
		command, code string
		want          int
		msg           string
	}{
		{"ADD", "0", 104, "^stewardd at /s/sock answered with code 0, which an ADD cannot have: m$"},
		{"ADD", "-3", 104, "^stewardd at /s/sock answered with code -3, which an ADD cannot have: m$"},
		{"CHECK", "3.5", 104, "^stewardd at /s/sock answered with code 3.5, which a CHECK cannot have: m$"},
		{"GC", "1e400", 104, "^stewardd at /s/sock answered with code 1e400, which a GC cannot have: m$"},
		{"ADD", "50", 50, "^m$"}, // a delegate's own, passed through as stewardd passes it
		{"STATUS", "0", 50, "^stewardd is not available: stewardd at /s/sock answered with code 0, which a STATUS cannot have: m$"},
		{"STATUS", "51", 51, "^m$"},
		{"ADD", "7", 7, "^m$"},
		{"DEL", "11", 11, "^m$"},
		{"ADD", "100", 100, "^m$"},
		{"ADD", "999", 999, "^m$"},
	} {
		e := env{"CNI_COMMAND": c.command, "CNI_CONTAINERID": "abc", "CNI_NETNS": "/n", "CNI_IFNAME": "eth0", "CNI_PATH": "/p"}
		in := input{env: e, stdin: []byte(`{"cniVersion":"1.1.0","name":"n","socket":"/s/sock"}`), elapsed: zero}
		body := `{"cniVersion":"1.1.0","code":` + c.code + `,"msg":"m","details":"d"}`
		out, code := run(in, fakeSend(&[]sendCall{}, reply{status: 400, body: []byte(body), hasProtocol: true, protocol: strconv.Itoa(protocolVersion)}, nil),
			func(string, string, []byte) (string, error) { return "", nil })
		var got struct {
			Code    int    `json:"code"`
			Msg     string `json:"msg"`
			Details string `json:"details"`
		}
		if code != 1 || json.Unmarshal(out, &got) != nil || got.Code != c.want || !regexp.MustCompile(c.msg).MatchString(got.Msg) || got.Details != "d" {
			t.Errorf("%s answered code %s: exit %d %s, want code %d and msg %s", c.command, c.code, code, out, c.want, c.msg)
		}
	}
}

func TestVersionShapedTakesThreePartsOfOneToFourASCIIDigits(t *testing.T) {
	for v, want := range map[string]bool{
		"1.0.0": true, "0.2.0": true, "9999.9999.9999": true,
		"": false, "1.0": false, "1.0.0.0": false, "1..0": false, ".1.0": false, "10000.0.0": false,
		"a.b.c": false, "1.0.0 ": false, "\u202e1.0.0": false, "\uff11.0.0": false, "-1.0.0": false,
	} {
		if got := versionShaped(v); got != want {
			t.Errorf("versionShaped(%q) = %v, want %v", v, got, want)
		}
	}
}
