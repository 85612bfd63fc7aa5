// The steward CNI plugin executable: wires the process (environment, stdin, stdout, the socket,
// the spool, the clock) into run and exits with its code. Nothing here decides anything.

package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
)

// The process's start as near as Go lets a program see it: package variables are set before
// main runs. The STATUS bound counts from here.
var started = time.Now()

func main() {
	// A shim that lives for milliseconds needs one thread of Go code: fewer Ps is less start-up
	// and GC work on many-core nodes (containerd #10897); reading stdin blocks a thread of its own.
	runtime.GOMAXPROCS(1)
	debug.SetTraceback("none")
	holdStdFds()
	var out []byte
	code := 1
	func() {
		defer func() {
			if p := recover(); p != nil {
				out = newError(codeInternal, fmt.Sprintf("steward shim: unexpected error: %v", p)).encode(latestVersion)
				code = 1
			}
		}()
		out, code = process()
	}()
	writeStdout(1, out)
	os.Exit(code)
}

func process() ([]byte, int) {
	return call(environ(os.Environ()), 0, func() time.Duration { return time.Since(started) }, postUnix, spoolRequest)
}

// call is one CNI call: stdin read from fd within its bound, then run.
func call(e env, fd int, elapsed func() time.Duration, send sender, spool spooler) ([]byte, int) {
	bound := stdinBound(e, elapsed())
	stdin, closed := readStdin(fd, maxNetconfBytes+1, bound)
	if !closed {
		return stdinNotClosed(bound), 1
	}
	return run(input{env: e, stdin: stdin, elapsed: elapsed}, send, spool)
}

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

// holdStdFds opens /dev/null on fd 0, 1 or 2 when the runtime left it closed, so nothing the shim
// opens later (the socket, a spool file, the runtime's own poller) takes its number and receives
// the answer meant for stdout. A closed stdin is then an empty one; a closed stdout discards it.
func holdStdFds() {
	for fd := 0; fd <= 2; fd++ {
		if _, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFD, 0); errno == syscall.EBADF {
			// open(2) returns the lowest free number: this one.
			if got, err := syscall.Open("/dev/null", syscall.O_RDWR, 0); err == nil && got != fd {
				_ = syscall.Close(got)
			}
		}
	}
}

// readStdin reads until EOF or until more than limit bytes arrived (the caller refuses those);
// closed is false when stdin was still open after bound (a runtime always writes and closes it, so
// the shim's bounds hold however long a broken caller keeps it open). The read runs on its own
// goroutine: left blocked there, it does not hold the exit. A read error ends the input.
func readStdin(fd, limit int, bound time.Duration) (data []byte, closed bool) {
	done := make(chan []byte, 1)
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
			if n <= 0 {
				break
			}
			buf = buf[:len(buf)+n]
		}
		done <- buf
	}()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case data = <-done:
		return data, true
	case <-timer.C:
		return nil, false
	}
}

// writeStdout writes all of out to fd 1, also when the runtime handed over a non-blocking pipe.
// A closed stdout (EPIPE) is ignored: the exit code is all that is left. (syscall.Write, not
// os.Stdout: Go kills a program by SIGPIPE on a failed write to os.Stdout.)
func writeStdout(fd int, out []byte) {
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
