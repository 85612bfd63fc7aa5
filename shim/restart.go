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
	"time"
)

// restartLeft: how much longer the restart record beside socket covers a missing or refusing
// stewardd; 0 when there is none, it is from another boot, or its deadline has passed.
type restartLeft func(socket string) time.Duration

// restartRecordLeft is the real one: the record and the kernel's boot id, read from the node.
func restartRecordLeft(socket string) time.Duration {
	return recordLeft(readSmall(socket+restartRecordSuffix), readSmall(bootIDFile), time.Now())
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

// readSmall reads at most 4 KiB of a file (the record and the boot id are tens of bytes); nil when
// it cannot be read.
func readSmall(path string) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 4096))
	return b
}
