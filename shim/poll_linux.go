// The process's standard descriptors as Linux tells them: waiting for a non-blocking stdout to
// drain or a non-blocking stdin to be written, without the runtime's poller (the shim reads and
// writes them by syscall), and whether stdin is a terminal.

package main

import (
	"syscall"
	"time"
	"unsafe"
)

// waitWritable blocks until fd is writable (poll(2)), or a millisecond has passed.
func waitWritable(fd int) { waitFor(fd, pollOut, time.Millisecond) }

// waitReadable blocks until fd is readable or hung up (poll(2)), or 100 ms have passed: its caller
// looks again and its own bound ends the wait.
func waitReadable(fd int) { waitFor(fd, pollIn, 100*time.Millisecond) }

const (
	pollIn  = 0x1
	pollOut = 0x4
)

// waitFor blocks until fd has one of events (POLLHUP and POLLERR are always reported), or timeout
// has passed. Its outcome (EINTR included) is not needed: the caller tries its read or write again.
func waitFor(fd int, events int16, timeout time.Duration) {
	type pollFd struct {
		fd      int32
		events  int16
		revents int16
	}
	p := pollFd{fd: int32(fd), events: events}
	ts := syscall.NsecToTimespec(int64(timeout))
	_, _, _ = syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&p)), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
}

// isTerminal: fd is a terminal (a person typing), told by the TCGETS ioctl as isatty(3) does.
func isTerminal(fd int) bool {
	var t syscall.Termios
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TCGETS, uintptr(unsafe.Pointer(&t)))
	return errno == 0
}
