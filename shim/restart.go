// A planned restart of stewardd (a DaemonSet rolling update, a drain's eviction, a restart by its
// owner): on SIGTERM, before its socket closes, stewardd writes a record beside the socket saying
// it is restarting and until when (daemon/src/lifecycle/restart-record.ts). While that record is
// fresh, the gap between the old process and its successor is no death: STATUS tells the runtime
// the network is ready, and ADD, CHECK and GC wait for the successor instead of failing. An
// unplanned end (kill -9, a crash, an OOM kill, a frozen process) leaves no fresh record, and a
// record from another boot or past its deadline is ignored, so a death is still told at once.

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strconv"
	"syscall"
	"time"
)

// restartPoll: how often an ADD, CHECK or GC looks for the successor during a restart.
const restartPoll = 100 * time.Millisecond

// restartLeft: how much longer the restart record beside socket covers a missing or refusing
// stewardd; 0 when there is none, it is from another boot, or its deadline has passed. seen: a
// record of a restart on this boot was there (one whose grace ran out, when left is 0); not for a
// file that is no record, another boot's, or one written in the future, which were never believed.
type restartLeft func(socket string) (left time.Duration, seen bool)

// restartRecordLeft is the real one: the record, when it was written and the kernel's boot id, read
// from the node.
func restartRecordLeft(socket string) (time.Duration, bool) {
	record, written := readSmallFile(socket + restartRecordSuffix)
	return readRecord(record, written, readSmall(bootIDFile), time.Now())
}

// recordLeft decides from the record's bytes, when it was written (the file's mtime: stewardd
// replaces it whole), the boot id and the time.
func recordLeft(record []byte, written time.Time, bootID []byte, now time.Time) time.Duration {
	left, _ := readRecord(record, written, bootID, now)
	return left
}

// readRecord is recordLeft, and whether the record is one of this boot's (seen, restartLeft).
func readRecord(record []byte, written time.Time, bootID []byte, now time.Time) (left time.Duration, seen bool) {
	var rec struct {
		BootID string `json:"bootId"`
		Until  int64  `json:"until"` // ms since the epoch
	}
	if len(record) == 0 || json.Unmarshal(record, &rec) != nil {
		return 0, false
	}
	boot := string(bytes.TrimSpace(bootID))
	if boot == "" || rec.BootID != boot {
		return 0, false
	}
	// A record is believed for at most the longest grace after it was written, whatever its
	// deadline says: a clock stepped back, or a record written by hand, never keeps a dead stewardd
	// "ready" for long. (Capping what is left at each call instead let such a record slide forever.)
	// One written in the future (more than a grace ahead of this clock) is not believed at all.
	if written.After(now.Add(maxRestartGrace)) {
		return 0, false
	}
	left = min(time.UnixMilli(rec.Until).Sub(now), written.Add(maxRestartGrace).Sub(now), maxRestartGrace)
	return max(left, 0), true
}

// readSmall reads at most 4 KiB of a regular file (the record, the beacon and the boot id are tens
// or hundreds of bytes); nil when it cannot be read or is no regular file. Opened non-blocking and
// checked on the descriptor: a FIFO left where the record or the beacon lives would otherwise hold
// open(2) and read(2), and with them a STATUS that containerd waits on with no deadline of its own.
func readSmall(path string) []byte {
	b, _ := readSmallFile(path)
	return b
}

// readSmallFile is readSmall, with the file's modification time.
func readSmallFile(path string) ([]byte, time.Time) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, time.Time{}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return nil, time.Time{}
	}
	b, _ := io.ReadAll(io.LimitReader(f, 4096))
	return b, st.ModTime()
}

// notReadyNote is what the shim leaves beside the socket when it answers STATUS not ready on its
// own (stewardd could not answer), for stewardd to report once it is back (`stewardd status`,
// steward_status_not_ready_timestamp_seconds): when, why (unreachable, frozen, grace expired) and
// the message the runtime got.
type notReadyNote func(socket, why, msg string)

// writeNotReadyNote is the real one: <socket>.status-not-ready, replaced whole (temp file and
// rename), never fsynced (it lives in /run; losing it loses a report, nothing else). A socket
// directory that is gone gets none.
func writeNotReadyNote(socket, why, msg string) {
	note := encodeJSON(struct {
		At     int64  `json:"at"`
		Why    string `json:"why"`
		Reason string `json:"reason"`
	}{time.Now().UnixMilli(), why, msg})
	path := socket + statusNotReadySuffix
	tmp := path + ".tmp" + strconv.Itoa(os.Getpid())
	if writeNew(tmp, note) != nil {
		return
	}
	if os.Rename(tmp, path) != nil {
		_ = os.Remove(tmp)
	}
}

// writeNew writes a file that must not exist yet (O_EXCL, so never through a link someone left at
// that name); one left there by an earlier shim of the same pid is removed first (the link itself,
// not what it names). On failure nothing of it is left.
func writeNew(path string, data []byte) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL | syscall.O_NOFOLLOW
	f, err := os.OpenFile(path, flags, 0o600)
	if errors.Is(err, os.ErrExist) {
		_ = os.Remove(path)
		f, err = os.OpenFile(path, flags, 0o600)
	}
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
	}
	return err
}
