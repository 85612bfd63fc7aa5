// Writing a DEL to the spool when stewardd cannot take it: a temp file, fsync, rename, fsync of
// the directory (and of the parent of each directory level it had to create), so stewardd never
// ingests a half-written request and a crash never loses a written one. The name is shared/vectors/spool.json's (stewardd's ingest, daemon/src/engine/
// spool.ts, reads exactly that): <ms since the epoch, 15 digits>-<container id, 64 chars at most>-
// <8 hex digits>.json, and the temp file is .<same stem>.tmp, which the ingest never reads.

package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// spooler writes one request into dir; it returns the file's path.
type spooler func(dir, containerID string, body []byte) (string, error)

// spoolName is the file name's stem for a DEL of containerID at now, with 4 random bytes.
func spoolName(now time.Time, containerID string, random [4]byte) string {
	ms := strconv.FormatInt(now.UnixNano()/int64(time.Millisecond), 10)
	if len(ms) < 15 {
		ms = strings.Repeat("0", 15-len(ms)) + ms
	}
	if len(containerID) > 64 {
		containerID = containerID[:64]
	}
	const hex = "0123456789abcdef"
	r := make([]byte, 0, 8)
	for _, b := range random {
		r = append(r, hex[b>>4], hex[b&0xf])
	}
	return ms + "-" + containerID + "-" + string(r)
}

// randomBytes: four bytes from the kernel's generator; the time and pid when it cannot be read
// (the file is opened O_EXCL, so a collision is an error, never an overwrite).
func randomBytes() [4]byte {
	var b [4]byte
	if f, err := os.Open("/dev/urandom"); err == nil {
		n, _ := f.Read(b[:])
		f.Close()
		if n == 4 {
			return b
		}
	}
	v := uint32(time.Now().UnixNano()) ^ uint32(os.Getpid())<<16
	return [4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}

// spoolRequest is the real spooler.
func spoolRequest(dir, containerID string, body []byte) (string, error) {
	if err := makeDirs(dir); err != nil {
		return "", err
	}
	name := spoolName(time.Now(), containerID, randomBytes())
	tmp := filepath.Join(dir, "."+name+".tmp")
	final := filepath.Join(dir, name+".json")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	// os.File.Write loops until every byte is written: a short write on a nearly full disk
	// continues, and an error (ENOSPC) is returned; a spool file cut short is a DEL lost.
	_, err = f.Write(body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err != nil {
		// Nothing half-written stays behind: the ingest reads only *.json, so a temp file would never go.
		_ = os.Remove(tmp)
		return "", err
	}
	if err := syncDir(dir); err != nil {
		return "", err
	}
	return final, nil
}

// makeDirs is mkdir -p with mode 0700, one level at a time, each EEXIST taken as done. Not
// os.MkdirAll, which stats each level first: this is the same walk stewardd's own writer makes.
// Each level it creates is made durable: its parent directory is fsynced, so a crash after the
// spool file's own fsyncs cannot lose the directory entry that leads to it (a spool file whose
// directory vanished with the crash is a DEL lost, answered 0 to the runtime).
func makeDirs(dir string) error {
	parts := strings.Split(dir, "/")
	for i := 1; i <= len(parts); i++ {
		if parts[i-1] == "" || parts[i-1] == "." {
			continue
		}
		p := strings.Join(parts[:i], "/")
		if err := os.Mkdir(p, 0o700); err != nil {
			if errors.Is(err, syscall.EEXIST) {
				continue
			}
			return err
		}
		if err := syncDir(parentOf(parts[:i-1], dir)); err != nil {
			return err
		}
	}
	return nil
}

// parentOf is the directory holding the level after `parts`: their join, or the root of an
// absolute dir ("/"), or the working directory of a relative one (".").
func parentOf(parts []string, dir string) string {
	if p := strings.Join(parts, "/"); p != "" {
		return p
	}
	if strings.HasPrefix(dir, "/") {
		return "/"
	}
	return "."
}

// syncDir fsyncs a directory, so the entries made in it are on disk.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
