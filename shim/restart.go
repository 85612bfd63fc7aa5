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
// record was there (a restart whose grace ran out, when left is 0).
type restartLeft func(socket string) (left time.Duration, seen bool)

// restartRecordLeft is the real one: the record and the kernel's boot id, read from the node.
func restartRecordLeft(socket string) (time.Duration, bool) {
	record := readSmall(socket + restartRecordSuffix)
	return recordLeft(record, readSmall(bootIDFile), time.Now()), len(record) > 0
}

// recordLeft decides from the record's bytes, the boot id and the time.
func recordLeft(record, bootID []byte, now time.Time) time.Duration {
	var rec struct {
		BootID string `json:"bootId"`
		Until  int64  `json:"until"` // ms since the epoch
	}
	if len(record) == 0 || json.Unmarshal(record, &rec) != nil {
		return 0
	}
	boot := string(bytes.TrimSpace(bootID))
	if boot == "" || rec.BootID != boot {
		return 0
	}
	left := time.UnixMilli(rec.Until).Sub(now)
	if left <= 0 {
		return 0
	}
	// A record can promise no more than the longest grace: a clock stepped back, or a record
	// written by hand, never keeps a dead stewardd "ready" for long.
	return min(left, maxRestartGrace)
}

// readSmall reads at most 4 KiB of a regular file (the record, the beacon and the boot id are tens
// or hundreds of bytes); nil when it cannot be read or is no regular file. Opened non-blocking and
// checked on the descriptor: a FIFO left where the record or the beacon lives would otherwise hold
// open(2) and read(2), and with them a STATUS that containerd waits on with no deadline of its own.
func readSmall(path string) []byte {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(f, 4096))
	return b
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
	if os.WriteFile(tmp, note, 0o600) != nil {
		_ = os.Remove(tmp)
		return
	}
	if os.Rename(tmp, path) != nil {
		_ = os.Remove(tmp)
	}
}
