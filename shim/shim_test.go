// Unit tests of what the vectors cannot reach through a socket: the injected sender's and
// spooler's calls, the defaults a DEL falls back to, the JSON writer, the answer parser's edges,
// and the process wiring (environment, stdout).

package main

import (
	"errors"
	"os"
	"path/filepath"
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
		if len(calls) != 1 || calls[0].socket != defaultSocket || calls[0].timeout != defaultCommandBound {
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
		fakeSend(&calls, reply{status: 200, hasProtocol: true, protocol: "2"}, nil), nil)
	if code != 0 || calls[0].socket != "/x/s.sock" || calls[0].timeout != 3*time.Second {
		t.Errorf("%d %+v", code, calls)
	}
	last := calls[0].headers[len(calls[0].headers)-1]
	if last != [2]string{"x-steward-protocol", "2"} {
		t.Errorf("headers %v", calls[0].headers)
	}
}

func TestAnErrorFromTheSenderThatIsNotUnreachableIsCode104AndNotSpooled(t *testing.T) {
	var calls []sendCall
	var dirs []string
	out, code := run(input{env: delEnv, stdin: []byte(`{"cniVersion":"0.4.0"}`), elapsed: zero},
		fakeSend(&calls, reply{}, errors.New("bug in client: not found")), fakeSpool(&dirs, nil))
	if code != 1 || !strings.Contains(string(out), `"code":104`) || !strings.Contains(string(out), "unexpected error: bug in client: not-found") {
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
	if got := stdinBound(env{"CNI_COMMAND": "STATUS"}, 0); got != statusBound {
		t.Errorf("stdin bound for STATUS %v", got)
	}
	if got := stdinBound(env{"CNI_COMMAND": "DEL"}, 0); got != defaultCommandBound {
		t.Errorf("stdin bound for DEL %v", got)
	}
	if got := string(stdinNotClosed(1499600 * time.Microsecond)); !strings.Contains(got, "within 1500 ms") {
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

func TestErrorsAreWrittenAsJSONStringifyWritesThem(t *testing.T) {
	e := &cniError{Code: 1.5, Msg: "a\"\\\b\f\n\r\t\x01\x7f é \xff <&> \u2028", Details: "d"}
	want := `{"cniVersion":"1.0.0","code":1.5,"msg":"a\"\\\b\f\n\r\t\u0001` + "\x7f é \uFFFD <&> \u2028" + `","details":"d"}`
	if got := string(e.encode("1.0.0")); got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
	for f, want := range map[float64]string{1e21: "1e+21", -3: "-3", 0.1: "0.1", 1e15: "1000000000000000"} {
		if got := string(appendJSONNumber(nil, f)); got != want {
			t.Errorf("%v: %s", f, got)
		}
	}
	if e.Error() != e.Msg {
		t.Error("Error()")
	}
}

func TestClipCutsLongTextSayingHowMuch(t *testing.T) {
	if got := clip("abcdef", 4); got != "abcd… [2 more characters cut]" {
		t.Error(got)
	}
	if got := clip("ab😀cd", 3); got != "ab… [4 more characters cut]" {
		t.Error(got)
	}
	if got := clip("abc", 4); got != "abc" {
		t.Error(got)
	}
	if got := utf16Len("😀é"); got != 3 {
		t.Error(got)
	}
}

func TestNamesAndIfnames(t *testing.T) {
	for name, ok := range map[string]bool{"a": true, "a_b.c-d": true, "-a": false, "a b": false, "é": false} {
		if (checkName(name) == "") != ok {
			t.Errorf("name %q", name)
		}
	}
	for name, ok := range map[string]bool{"eth0": true, ".": false, "a\u3000b": false, "a\u2003b": false, "e\x01": false, "": false} {
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
	writeStdout(fd, data)
	w.Close()
	if n := <-got; n != len(data) {
		t.Errorf("read %d of %d", n, len(data))
	}
}

func TestWriteStdoutToAClosedPipeReturns(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	defer w.Close()
	writeStdout(int(w.Fd()), []byte("answer")) // EPIPE: nothing to do, and no SIGPIPE death
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
