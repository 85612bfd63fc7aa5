// The process itself: the built binary run as a runtime would run it, with its standard
// descriptors closed or open, against a fake stewardd that records every byte it receives. This is
// what main wires (environment, stdin, stdout, exit code) and nothing in run.go can show.

package main

import (
	"bytes"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// regexpTemp matches a temp directory of a test (t.TempDir) in what the shim sent.
var regexpTemp = regexp.MustCompile(regexp.QuoteMeta(os.TempDir()) + `/[^"/]+/[0-9]+/|(?i)content-length: [0-9]+`)

// builtDir is buildShim's temp dir, removed by TestMain once every test has run.
var builtDir string

// buildShim builds this package once per test binary into a temp dir.
var buildShim = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "stb")
	if err != nil {
		return "", err
	}
	builtDir = dir
	exe := filepath.Join(dir, "steward")
	cmd := exec.Command("go", "build", "-ldflags", "-X main.version=test-build", "-o", exe, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", &exec.ExitError{Stderr: out}
	}
	return exe, nil
})

func shimBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	exe, err := buildShim()
	if err != nil {
		t.Fatalf("go build: %v", err)
	}
	return exe
}

// recordingDaemon accepts connections on a Unix socket, answers each request once it has arrived,
// half-closes and keeps reading until the client closes: every byte the client sent is recorded.
// The i-th connection gets the i-th answer, the last one those after it.
type recordingDaemon struct {
	mu    sync.Mutex
	conns [][]byte
	wg    sync.WaitGroup
}

func startRecordingDaemon(t *testing.T, socket string, answers ...string) *recordingDaemon {
	t.Helper()
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	d := &recordingDaemon{}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for i := 0; ; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			answer := answers[min(i, len(answers)-1)]
			d.wg.Add(1)
			go func() {
				defer d.wg.Done()
				defer c.Close()
				var got []byte
				buf := make([]byte, 64*1024)
				answered := false
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				for {
					n, err := c.Read(buf)
					got = append(got, buf[:n]...)
					if !answered && bytes.Contains(got, []byte("\r\n\r\n")) && requestComplete(got) {
						_, _ = io.WriteString(c, answer)
						// Half-closed: the client sees the answer end, and what it sends after is still read.
						_ = c.(*net.UnixConn).CloseWrite()
						answered = true
					}
					if err != nil {
						break
					}
				}
				d.mu.Lock()
				d.conns = append(d.conns, got)
				d.mu.Unlock()
			}()
		}
	}()
	return d
}

// requestComplete: the head and Content-Length bytes of body have arrived.
func requestComplete(b []byte) bool {
	end := bytes.Index(b, []byte("\r\n\r\n"))
	head := strings.ToLower(string(b[:end]))
	i := strings.Index(head, "content-length: ")
	if i < 0 {
		return true
	}
	n := 0
	for _, c := range head[i+len("content-length: "):] {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return len(b)-end-4 >= n
}

func (d *recordingDaemon) received() [][]byte {
	d.wg.Wait()
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.conns
}

const okAnswer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Steward-Protocol: 2\r\nContent-Length: 22\r\n\r\n{\"cniVersion\":\"1.0.0\"}"

func TestWithItsStandardDescriptorsClosedTheShimSendsOnlyTheRequest(t *testing.T) {
	exe := shimBinary(t)
	dir := t.TempDir()
	socket := filepath.Join(dir, "s.sock")
	d := startRecordingDaemon(t, socket, okAnswer)
	conf := `{"cniVersion":"1.0.0","name":"n","socket":"` + socket + `","delegates":[{"name":"d","type":"bridge"}]}`
	if err := os.WriteFile(filepath.Join(dir, "conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	// stdin from the file, stdout and stderr closed: without /dev/null on fd 1, the socket would
	// be fd 1 and the printed answer would travel back to stewardd.
	cmd := exec.Command("/bin/sh", "-c", `exec "$0" <"$1" >&- 2>&-`, exe, filepath.Join(dir, "conf"))
	cmd.Env = []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=abc", "CNI_NETNS=/n", "CNI_IFNAME=eth0", "CNI_PATH=/p"}
	if err := cmd.Run(); err != nil {
		t.Fatalf("exit: %v", err)
	}
	conns := d.received()
	if len(conns) != 1 {
		t.Fatalf("%d connections", len(conns))
	}
	end := bytes.Index(conns[0], []byte("\r\n\r\n"))
	if body := conns[0][end+4:]; !bytes.HasPrefix(body, []byte(`{"env":`)) || !bytes.HasSuffix(body, []byte("}}")) || bytes.Contains(body, []byte("cniVersion\":\"1.0.0\"}{")) {
		t.Errorf("stewardd received more than the request: %q", body)
	}
}

func TestTheBinaryPrintsTheAnswerAndExitsWithItsCode(t *testing.T) {
	exe := shimBinary(t)
	dir := t.TempDir()
	socket := filepath.Join(dir, "s.sock")
	startRecordingDaemon(t, socket, okAnswer)
	cmd := exec.Command(exe)
	cmd.Env = []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=abc", "CNI_NETNS=/n", "CNI_IFNAME=eth0", "CNI_PATH=/p"}
	cmd.Stdin = strings.NewReader(`{"cniVersion":"1.0.0","name":"n","socket":"` + socket + `"}`)
	out, err := cmd.Output()
	if err != nil || string(out) != `{"cniVersion":"1.0.0"}` {
		t.Errorf("%v %q", err, out)
	}
	cmd = exec.Command(exe)
	cmd.Env = []string{"CNI_COMMAND=ADD"}
	cmd.Stdin = strings.NewReader(`{"cniVersion":"0.4.0"}`)
	out, err = cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.HasPrefix(string(out), `{"cniVersion":"0.4.0","code":4,`) {
		t.Errorf("%v %q", err, out)
	}
}

func TestVersionAndAboutAreForAPerson(t *testing.T) {
	exe := shimBinary(t)
	out, err := exec.Command(exe, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "steward test-build (go1.") {
		t.Errorf("--version: %v %q", err, out)
	}
	// No CNI_COMMAND: the about text on stderr, the CNI error on stdout, code 4.
	cmd := exec.Command(exe)
	cmd.Env = []string{}
	cmd.Stdin = strings.NewReader("")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), `"code":4`) {
		t.Errorf("%v %q", err, out)
	}
	if !strings.Contains(stderr.String(), "steward test-build: the CNI plugin of cni-steward") {
		t.Errorf("about: %q", stderr.String())
	}
}

func TestVERSIONAnswersOnceItHasAWholeJSONValueWithoutWaitingForStdinToClose(t *testing.T) {
	exe := shimBinary(t)
	cmd := exec.Command(exe)
	cmd.Env = []string{"CNI_COMMAND=VERSION"}
	w, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	_, _ = io.WriteString(w, `{"cniVersion":"0.4.0"}`)
	// stdin stays open: the answer is the version asked for, not a timeout's newest.
	if err := cmd.Wait(); err != nil || !strings.HasPrefix(out.String(), `{"cniVersion":"0.4.0","supportedVersions"`) {
		t.Errorf("%v %q", err, out.String())
	}
}

// sendByBinary runs the built shim through /bin/sh with the redirections given (e.g. `>&- 2>&-`),
// the netconf on stdin from a file unless the redirections close it, and returns the bytes the fake
// stewardd received on each connection and the process state.
func sendByBinary(t *testing.T, redirections string) ([][]byte, *os.ProcessState) {
	t.Helper()
	exe := shimBinary(t)
	dir := t.TempDir()
	socket := filepath.Join(dir, "s.sock")
	d := startRecordingDaemon(t, socket, okAnswer)
	conf := `{"cniVersion":"1.0.0","name":"n","socket":"` + socket + `","spoolDir":"` + dir + `/spool","delegates":[{"name":"d","type":"bridge"}]}`
	if err := os.WriteFile(filepath.Join(dir, "conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", `exec "$0" <"$1" `+redirections, exe, filepath.Join(dir, "conf"))
	cmd.Env = []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=abc", "CNI_NETNS=/n", "CNI_IFNAME=eth0", "CNI_PATH=/p"}
	// Open descriptors are pipes, as a runtime's are (not /dev/null, which a closed one becomes).
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	timer := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	_ = cmd.Run()
	return d.received(), cmd.ProcessState
}

func TestWithStdoutAndStderrClosedStewarddReceivesExactlyTheBytesOfARunWithThemOpen(t *testing.T) {
	open, st := sendByBinary(t, "")
	if st.ExitCode() != 0 || len(open) != 1 {
		t.Fatalf("open descriptors: exit %v, %d connections", st, len(open))
	}
	// The socket path differs per run (a temp dir each, and so Content-Length): blanked out.
	blank := func(b []byte) []byte {
		return regexpTemp.ReplaceAll(b, []byte("<varies>"))
	}
	for _, redir := range []string{">&- 2>&-", ">&-", "2>&-"} {
		closed, st := sendByBinary(t, redir)
		if st.ExitCode() != 0 {
			t.Errorf("%s: exit %v", redir, st)
		}
		if len(closed) != 1 {
			t.Fatalf("%s: %d connections", redir, len(closed))
		}
		// Every byte: an answer written to a socket that took fd 1 (or an about text on fd 2) would
		// arrive after the request, and Content-Length would differ with the path's length only.
		if a, b := blank(open[0]), blank(closed[0]); !bytes.Equal(a, b) {
			t.Errorf("%s: stewardd received\n%q\nwant what a run with open descriptors sends\n%q", redir, b, a)
		}
	}
}

func TestWithAllThreeStandardDescriptorsClosedTheShimExitsOneWithoutWaiting(t *testing.T) {
	// fd 0 closed is /dev/null to the shim (Go's runtime opens it): an empty netconf, refused at
	// once (nothing to wait for: EOF), exit 1, and no connection to anything.
	start := time.Now()
	conns, st := sendByBinary(t, "<&- >&- 2>&-")
	if st.Sys().(syscall.WaitStatus).Signaled() || st.ExitCode() != 1 {
		t.Errorf("exit %v, want code 1", st)
	}
	if len(conns) != 0 {
		t.Errorf("stewardd received %q", conns)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %v: the empty stdin was waited on", d)
	}
}

func TestTheBinaryWritingToAClosedStdoutExitsWithItsCode(t *testing.T) {
	exe := shimBinary(t)
	dir := t.TempDir()
	socket := filepath.Join(dir, "s.sock")
	d := startRecordingDaemon(t, socket, okAnswer)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // nobody reads the answer: the write gets EPIPE (and the kernel sends SIGPIPE)
	defer w.Close()
	cmd := exec.Command(exe)
	cmd.Env = []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=abc", "CNI_NETNS=/n", "CNI_IFNAME=eth0", "CNI_PATH=/p"}
	cmd.Stdin = strings.NewReader(`{"cniVersion":"1.0.0","name":"n","socket":"` + socket + `"}`)
	cmd.Stdout = w
	_ = cmd.Run()
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); ws.Signaled() || ws.ExitStatus() != 0 {
		t.Errorf("exit %v: want 0, the ADD's code, not a death by %v", cmd.ProcessState, ws.Signal())
	}
	if n := len(d.received()); n != 1 {
		t.Errorf("%d connections", n)
	}
}

// A DEL spooled because stewardd's answer could not be used exits 0 with nothing on stdout, as the
// CNI spec has a DEL succeed; stderr, which the runtime logs, says why it was spooled.
func TestTheBinarySaysOnStderrWhyADELWasSpooled(t *testing.T) {
	exe := shimBinary(t)
	dir := shortTempDir(t)
	socket := filepath.Join(dir, "s.sock")
	d := startRecordingDaemon(t, socket, "HTTP/1.1 100 Continue\r\n\r\n")
	cmd := exec.Command(exe)
	cmd.Env = []string{"CNI_COMMAND=DEL", "CNI_CONTAINERID=abc", "CNI_IFNAME=eth0", "CNI_PATH=/p"}
	cmd.Stdin = strings.NewReader(`{"cniVersion":"1.0.0","name":"n","socket":"` + socket + `","spoolDir":"` + dir + `/spool"}`)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	files, _ := filepath.Glob(filepath.Join(dir, "spool", "*.json"))
	if err != nil || len(out) != 0 || len(files) != 1 || len(d.received()) != 1 {
		t.Fatalf("%v %q, spooled %v; want exit 0, nothing on stdout, the DEL spooled", err, out, files)
	}
	if got := stderr.String(); !strings.HasPrefix(got, "steward: stewardd at "+socket+" answered, but not with a usable HTTP answer: ") ||
		!strings.Contains(got, "interim status 100") || !strings.Contains(got, "the DEL was spooled to "+files[0]) || strings.Count(got, "\n") != 1 {
		t.Errorf("stderr %q", got)
	}
}

// A runtime may hand over stdin as a non-blocking pipe: read before the netconf is written, it
// answers EAGAIN, which is no end of input: the shim waits for the netconf within its bound.
func TestANonBlockingStdinIsWaitedForNotReadAsEmpty(t *testing.T) {
	exe := shimBinary(t)
	dir := shortTempDir(t)
	socket := filepath.Join(dir, "s.sock")
	d := startRecordingDaemon(t, socket, okAnswer)
	var in, out [2]int
	if err := syscall.Pipe2(in[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Pipe2(out[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	// O_NONBLOCK is the open pipe's, which the shim's fd 0 shares. Not exec.Cmd: os.File.Fd(),
	// which it calls, puts a descriptor back in blocking mode.
	if err := syscall.SetNonblock(in[0], true); err != nil {
		t.Fatal(err)
	}
	env := []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=abc", "CNI_NETNS=/n", "CNI_IFNAME=eth0", "CNI_PATH=/p"}
	pid, err := syscall.ForkExec(exe, []string{exe}, &syscall.ProcAttr{Env: env, Files: []uintptr{uintptr(in[0]), uintptr(out[1]), uintptr(out[1])}})
	syscall.Close(in[0])
	syscall.Close(out[1])
	if err != nil {
		syscall.Close(in[1])
		syscall.Close(out[0])
		t.Fatal(err)
	}
	proc, _ := os.FindProcess(pid)
	timer := time.AfterFunc(30*time.Second, func() { _ = proc.Kill() })
	defer timer.Stop()
	time.Sleep(50 * time.Millisecond)
	_, werr := syscall.Write(in[1], []byte(`{"cniVersion":"1.0.0","name":"n","socket":"`+socket+`"}`))
	syscall.Close(in[1])
	stdout := os.NewFile(uintptr(out[0]), "stdout")
	defer stdout.Close()
	got, _ := io.ReadAll(stdout)
	st, err := proc.Wait()
	if werr != nil || err != nil || st.ExitCode() != 0 || string(got) != `{"cniVersion":"1.0.0"}` || len(d.received()) != 1 {
		t.Errorf("write %v, exit %v %v, stdout %q: want the netconf read and the ADD answered", werr, st, err, got)
	}
}

// TestMain removes the binary buildShim built: each run of the suite left a copy in the temp dir.
func TestMain(m *testing.M) {
	code := m.Run()
	if builtDir != "" {
		os.RemoveAll(builtDir)
	}
	os.Exit(code)
}
