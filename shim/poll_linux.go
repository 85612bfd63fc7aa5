// The process's standard descriptors as Linux tells them: waiting for a non-blocking stdout to
// drain, without the runtime's poller (fd 1 was never registered with it), and whether stdin is a
// terminal.

package main

import (
	"syscall"
	"time"
	"unsafe"
)

// waitWritable blocks until fd is writable (poll(2)), or a millisecond has passed.
func waitWritable(fd int) {
	type pollFd struct {
		fd      int32
		events  int16
		revents int16
	}
	const pollOut = 0x4
	p := pollFd{fd: int32(fd), events: pollOut}
	_, _, errno := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&p)), 1,
		uintptr(unsafe.Pointer(&syscall.Timespec{Nsec: int64(time.Millisecond)})), 0, 0, 0)
	_ = errno
}

// isTerminal: fd is a terminal (a person typing), told by the TCGETS ioctl as isatty(3) does.
func isTerminal(fd int) bool {
	var t syscall.Termios
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TCGETS, uintptr(unsafe.Pointer(&t)))
	return errno == 0
}
