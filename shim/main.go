// The steward CNI plugin executable: wires the process (environment, stdin, stdout, the socket,
// the spool, the clock) into run and exits with its code. Nothing here decides anything.

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The process's start as near as Go lets a program see it: package variables are set before
// main runs. Every command's bound counts from here.
var started = time.Now()

func main() {
	// A shim that lives for milliseconds needs one thread of Go code: fewer Ps is less start-up
	// and GC work on many-core nodes (containerd #10897); reading stdin blocks a thread of its own.
	runtime.GOMAXPROCS(1)
	debug.SetTraceback("none")
	// A standard descriptor the runtime left closed is /dev/null already: Go's runtime opens it
	// before main (runtime.checkfds, Go 1.22+), so the socket or a spool file never takes fd 1
	// and receives the answer meant for stdout (shim_test.go runs the binary so).
	e := environ(os.Environ())
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "-version") {
		writeAll(1, []byte(versionText()))
		os.Exit(0)
	}
	if e.get("CNI_COMMAND") == "" {
		// A person at a terminal: say what this is, and do not wait for a netconf they will not type.
		writeAll(2, []byte(aboutText()))
		if isTerminal(0) {
			writeAll(1, newError(codeInvalidEnv, "CNI_COMMAND is not set").encode(latestVersion))
			os.Exit(1)
		}
	}
	var out []byte
	code := 1
	func() {
		// The last resort: a bug in the shim is still a CNI error on stdout, never a Go trace.
		defer func() {
			if p := recover(); p != nil {
				out = newError(codeInternal, fmt.Sprintf("steward shim: unexpected error: %v", p)).encode(latestVersion)
				code = 1
			}
		}()
		out, code = call(e, 0, func() time.Duration { return time.Since(started) }, postUnix, spoolRequest)
	}()
	writeAll(1, out)
	os.Exit(code)
}

// badEnvStdinWait: how long stdin is waited for when the environment is already known to be
// wrong: the answer is code 4 whatever stdin says (it only lends the error its cniVersion), so a
// caller that never closes stdin gets it now, not at the stdin bound.
const badEnvStdinWait = 100 * time.Millisecond

// call is one CNI call: stdin read from fd within its bound, then run.
func call(e env, fd int, elapsed func() time.Duration, send sender, spool spooler) ([]byte, int) {
	bound := stdinBound(e, elapsed())
	// VERSION needs only the version asked for: a whole JSON value read is enough.
	var complete func([]byte) bool
	command := e.get("CNI_COMMAND")
	if command == "VERSION" {
		complete = json.Valid
	}
	wait := bound.remaining
	_, envErr := parseCNIEnv(e)
	badEnv := envErr != nil && command != "VERSION"
	if badEnv {
		wait = min(wait, badEnvStdinWait)
		complete = json.Valid // whatever arrived is kept: a whole netconf lends its cniVersion
	}
	stdin, closed := readStdin(fd, maxNetconfBytes+1, wait, complete)
	if !closed && complete == nil && !badEnv {
		return stdinNotClosed(bound), 1
	}
	return run(input{env: e, stdin: stdin, elapsed: elapsed, restart: restartRecordLeft, sleep: time.Sleep,
		noteNotReady: writeNotReadyNote, beacon: readBeacon, warn: warnStderr, unspool: os.Remove}, send, spool)
}

// warnStderr writes one line for the runtime's log: it keeps a plugin's stderr, not its stdout.
func warnStderr(s string) { writeAll(2, []byte("steward: "+s+"\n")) }

// environ: the environment as a map; the first of a repeated name wins, as getenv(3) finds it.
func environ(kv []string) env {
	e := env{}
	for _, s := range kv {
		if i := strings.IndexByte(s, '='); i > 0 {
			if _, seen := e[s[:i]]; !seen {
				e[s[:i]] = s[i+1:]
			}
		}
	}
	return e
}

// readStdin reads until EOF, until more than limit bytes arrived (the caller refuses those) or,
// when complete is given, until what was read satisfies it; closed is false when none of that
// happened within bound (a runtime always writes and closes stdin, so the shim's bounds hold
// however long a broken caller keeps it open), and data is then what had arrived. The read runs on
// its own goroutine: left blocked there, it does not hold the exit. A read error ends the input,
// except EAGAIN: a non-blocking stdin that is empty for now is waited on, not taken for its end.
func readStdin(fd, limit int, bound time.Duration, complete func([]byte) bool) (data []byte, closed bool) {
	done := make(chan []byte, 1)
	var mu sync.Mutex
	var partial []byte
	go func() {
		buf := make([]byte, 0, 4096)
		for len(buf) <= limit {
			if len(buf) == cap(buf) {
				size := 2 * cap(buf)
				if size > limit+1 {
					size = limit + 1
				}
				grown := make([]byte, len(buf), size)
				copy(grown, buf)
				buf = grown
			}
			end := cap(buf)
			if end > limit+1 {
				end = limit + 1
			}
			n, err := syscall.Read(fd, buf[len(buf):end])
			if err == syscall.EINTR {
				continue
			}
			if err == syscall.EAGAIN {
				waitReadable(fd)
				continue
			}
			if n <= 0 {
				break
			}
			buf = buf[:len(buf)+n]
			if complete != nil {
				if complete(buf) {
					break
				}
				mu.Lock()
				partial = append(partial[:0], buf...)
				mu.Unlock()
			}
		}
		done <- buf
	}()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case data = <-done:
		return data, true
	case <-timer.C:
		mu.Lock()
		defer mu.Unlock()
		return partial, false
	}
}

// writeAll writes all of out to fd (stdout or stderr), also when the runtime handed over a
// non-blocking pipe. A closed one (EPIPE) is ignored: the exit code is all that is left.
// (syscall.Write, not os.Stdout: Go kills a program by SIGPIPE on a failed write to os.Stdout.)
func writeAll(fd int, out []byte) {
	for len(out) > 0 {
		n, err := syscall.Write(fd, out)
		if err == syscall.EAGAIN || err == syscall.EINTR {
			waitWritable(fd)
			continue
		}
		if err != nil || n <= 0 {
			return
		}
		out = out[n:]
	}
}
