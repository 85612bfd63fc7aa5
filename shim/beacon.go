// stewardd's alive beacon (shared/src/beacon.ts, daemon/src/lifecycle/alive-beacon.ts): while it
// serves, stewardd's main loop rewrites <socket>.alive within 100 ms of each connection (this call's
// among them), then every 100 ms while one is open, with the time, whether it is ready, and its last
// STATUS verdict per network. A STATUS that has had no answer by
// statusBeaconPatience reads it: a beat written since this call started proves stewardd's loop
// runs, only behind (a burst of pods on a busy node), so the shim answers that verdict now rather
// than wait out its bound and answer 50 for a live daemon (issue 37). A frozen or dead stewardd
// writes no new beat, and nothing changes for it: 50 at the bound, or at once when it is gone.

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"time"
)

// beaconPoll: how often a STATUS past its patience reads the beacon again.
const beaconPoll = aliveBeaconPeriod / 4

// beaconRead reads the beacon beside socket; nil when there is none.
type beaconRead func(socket string) []byte

// readBeacon is the real one.
func readBeacon(socket string) []byte { return readSmall(socket + aliveBeaconSuffix) }

// statusKey names a STATUS's network for the beacon (STATUS_KEY_HEADER): the first 32 hex digits
// of the SHA-256 of the request body.
func statusKey(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:16])
}

// beaconReady: the beacon's bytes say stewardd (of this shim's protocol) is ready, its last verdict
// on key's STATUS was a success, and its loop wrote them at or after since. A beat later than now
// (plus a second) was written before the clock was stepped back and proves nothing.
func beaconReady(b []byte, key string, since, now time.Time) bool {
	var bc struct {
		At       int64           `json:"at"`
		Protocol int             `json:"protocol"`
		Ready    bool            `json:"ready"`
		Status   map[string]bool `json:"status"`
	}
	if len(b) == 0 || json.Unmarshal(b, &bc) != nil {
		return false
	}
	return bc.Protocol == protocolVersion && bc.Ready && bc.Status[key] &&
		bc.At >= since.UnixMilli() && bc.At <= now.Add(time.Second).UnixMilli()
}

// beaconReply: the answer a live, ready stewardd gives a STATUS it has decided before.
func beaconReply() reply {
	return reply{status: 200, protocol: strconv.Itoa(protocolVersion), hasProtocol: true}
}

// withBeacon wraps a STATUS's sender: stewardd's answer when it comes first; from
// statusBeaconPatience on, the beacon's verdict as soon as it gives one; and at the bound, with no
// answer, the beacon's verdict if stewardd's loop beat during the call (behind, not frozen).
func withBeacon(send sender, in input, key string) sender {
	return func(socket, route string, body []byte, timeout time.Duration, headers [][2]string) (reply, error) {
		type result struct {
			r   reply
			err error
		}
		done := make(chan result, 1)
		go func() {
			r, err := send(socket, route, body, timeout, headers)
			done <- result{r, err}
		}()
		// The call's start on the wall clock, which the beacon's beats are written in.
		since := time.Now().Add(-in.elapsed())
		ready := func() bool { return beaconReady(in.beacon(socket), key, since, time.Now()) }
		wait := statusBeaconPatience - in.elapsed()
		for {
			timer := time.NewTimer(max(wait, 0))
			select {
			case res := <-done:
				timer.Stop()
				var u *unreachableError
				if errors.As(res.err, &u) && u.timeout && ready() {
					return beaconReply(), nil
				}
				return res.r, res.err
			case <-timer.C:
				if ready() {
					return beaconReply(), nil
				}
				wait = beaconPoll
			}
		}
	}
}
