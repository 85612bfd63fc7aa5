package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const beaconKey = "0123456789abcdef0123456789abcdef"

func beat(at time.Time, protocol int, ready bool, status string) []byte {
	return fmt.Appendf(nil, `{"at":%d,"pid":7,"protocol":%d,"ready":%t,"status":%s}`, at.UnixMilli(), protocol, ready, status)
}

func TestTheBeaconSpeaksOnlyForALiveReadyStewarddThatPassedThisNetworksSTATUS(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	since := now.Add(-300 * time.Millisecond)
	ok := `{"` + beaconKey + `":true}`
	for _, c := range []struct {
		name string
		b    []byte
		want bool
	}{
		{"a beat since the call started, ready, this network passed", beat(since.Add(50*time.Millisecond), protocolVersion, true, ok), true},
		{"a beat in the very ms the call started", beat(since, protocolVersion, true, ok), true},
		{"the last beat before the call started (frozen since)", beat(since.Add(-time.Millisecond), protocolVersion, true, ok), false},
		{"a beat from the future (the clock stepped back since)", beat(now.Add(2*time.Second), protocolVersion, true, ok), false},
		{"not ready", beat(now, protocolVersion, false, ok), false},
		{"another protocol", beat(now, protocolVersion+1, true, ok), false},
		{"this network failed its last STATUS", beat(now, protocolVersion, true, `{"`+beaconKey+`":false}`), false},
		{"this network never asked", beat(now, protocolVersion, true, `{"ffffffffffffffffffffffffffffffff":true}`), false},
		{"no beacon", nil, false},
		{"not JSON", []byte(`{"at":`), false},
		{"wrong types", []byte(`{"at":"now","protocol":2,"ready":true,"status":{}}`), false},
	} {
		if got := beaconReady(c.b, beaconKey, since, now); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestTheStatusKeyIsTheBodysHashAndTravelsOnlyWithSTATUS(t *testing.T) {
	for _, command := range []string{"STATUS", "ADD"} {
		var got [][2]string
		var body []byte
		in := input{env: env{"CNI_COMMAND": command, "CNI_CONTAINERID": "abc", "CNI_NETNS": "/n", "CNI_IFNAME": "eth0", "CNI_PATH": "/p"},
			stdin: []byte(`{"cniVersion":"1.1.0","name":"n"}`), elapsed: zero}
		run(in, func(_, _ string, b []byte, _ time.Duration, h [][2]string) (reply, error) {
			got, body = h, b
			return daemonAnswer(200, `{"cniVersion":"1.1.0"}`)
		}, nil)
		var key string
		for _, h := range got {
			if h[0] == statusKeyHeader {
				key = h[1]
			}
		}
		if want := map[bool]string{true: statusKey(body), false: ""}[command == "STATUS"]; key != want || (want != "" && len(key) != 32) {
			t.Errorf("%s: key %q, want %q", command, key, want)
		}
	}
}

// beaconCall runs one STATUS on a real clock: its sender answers after `answerAfter` with `answer`
// (or never, until the test ends), and the beacon reads what beacon returns at that moment.
func beaconCall(t *testing.T, answerAfter time.Duration, answer func() (reply, error), beacon func(since time.Time) []byte) (out []byte, code int, took time.Duration, reads int32) {
	t.Helper()
	start := time.Now()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var n atomic.Int32
	in := input{env: env{"CNI_COMMAND": "STATUS", "CNI_PATH": "/p"}, stdin: []byte(`{"cniVersion":"1.1.0","name":"n"}`),
		elapsed: func() time.Duration { return time.Since(start) },
		beacon:  func(string) []byte { n.Add(1); return beacon(start) }}
	send := func(string, string, []byte, time.Duration, [][2]string) (reply, error) {
		if answerAfter < 0 {
			<-release
			return reply{}, &unreachableError{reason: "ended", timeout: true}
		}
		time.Sleep(answerAfter)
		return answer()
	}
	out, code = run(in, send, nil)
	return out, code, time.Since(start), n.Load()
}

func passedBeat(since time.Time) []byte {
	return beat(time.Now(), protocolVersion, true, `{"`+statusKeyOfTheCall()+`":true}`)
}

// statusKeyOfTheCall: the key beaconCall's STATUS sends (its body is fixed).
func statusKeyOfTheCall() string {
	in := input{env: env{"CNI_COMMAND": "STATUS", "CNI_PATH": "/p"}, stdin: []byte(`{"cniVersion":"1.1.0","name":"n"}`), elapsed: zero}
	req, err := readRequest(in)
	if err != nil {
		panic(err.Msg)
	}
	return req.statusKey
}

func TestAnAnswerWithinThePatienceIsStewarddsOwnAndTheBeaconIsNotRead(t *testing.T) {
	out, code, _, reads := beaconCall(t, 0, func() (reply, error) {
		return daemonAnswer(503, `{"code":50,"msg":"stewardd is not ready (see /readyz)"}`)
	}, passedBeat)
	if code != 1 || !strings.Contains(string(out), "not ready") || reads != 0 {
		t.Errorf("%d %s, %d beacon reads", code, out, reads)
	}
}

func TestASlowAnswerFromALiveStewarddIsTheBeaconsVerdictAfterThePatience(t *testing.T) {
	out, code, took, reads := beaconCall(t, -1, nil, passedBeat)
	if code != 0 || len(out) != 0 || reads == 0 {
		t.Fatalf("%d %s, %d reads", code, out, reads)
	}
	if took < statusBeaconPatience || took >= statusBound {
		t.Errorf("answered after %v: not between the patience (%v) and the bound (%v)", took, statusBeaconPatience, statusBound)
	}
}

func TestAFrozenStewarddIsStill50AtTheBoundWhateverItsLastBeatSaid(t *testing.T) {
	// Its last beat, a moment before the call, said ready and passed: it has not beaten since.
	stale := func(since time.Time) []byte {
		return beat(since.Add(-10*time.Millisecond), protocolVersion, true, `{"`+statusKeyOfTheCall()+`":true}`)
	}
	out, code, _, reads := beaconCall(t, 0, func() (reply, error) {
		return reply{}, &unreachableError{reason: "timed out", timeout: true}
	}, stale)
	if code != 1 || !strings.Contains(string(out), `"code":50`) || reads != 1 {
		t.Errorf("%d %s, %d reads (the one at the bound)", code, out, reads)
	}
}

func TestAtTheBoundABeatDuringTheCallMeansBehindNotFrozen(t *testing.T) {
	out, code, _, reads := beaconCall(t, 0, func() (reply, error) {
		return reply{}, &unreachableError{reason: "timed out", timeout: true}
	}, passedBeat)
	if code != 0 || len(out) != 0 || reads != 1 {
		t.Errorf("%d %s, %d reads", code, out, reads)
	}
}

func TestAGoneStewarddIsNotAnsweredByItsBeacon(t *testing.T) {
	// Refused (kill -9 leaves the socket file): the beacon it left is not read, whatever it says.
	out, code, _, reads := beaconCall(t, 0, func() (reply, error) {
		return reply{}, &unreachableError{reason: "ECONNREFUSED"}
	}, passedBeat)
	if code != 1 || !strings.Contains(string(out), `"code":50`) || reads != 0 {
		t.Errorf("%d %s, %d reads", code, out, reads)
	}
}

func TestTheBeaconIsReadBesideTheSocket(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "stewardd.sock")
	if readBeacon(sock) != nil {
		t.Fatal("a beacon read where none is")
	}
	if err := os.WriteFile(sock+".alive", []byte(`{"at":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := string(readBeacon(sock)); got != `{"at":1}` {
		t.Errorf("read %q", got)
	}
}

func TestAFIFOWhereTheBeaconOrTheRecordLivesIsReadAsNoneAndHoldsNothing(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "stewardd.sock")
	for _, f := range []string{sock + aliveBeaconSuffix, sock + restartRecordSuffix} {
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan [3]bool, 1)
	go func() {
		left, seen := restartRecordLeft(sock)
		done <- [3]bool{readBeacon(sock) == nil, left == 0, seen}
	}()
	select {
	case got := <-done:
		if !got[0] || !got[1] || got[2] {
			t.Errorf("beacon nil %v, no restart left %v, record seen %v", got[0], got[1], got[2])
		}
	case <-time.After(2 * time.Second):
		t.Fatal("reading a FIFO beside the socket blocked")
	}
}

// keepBeating writes a live, ready stewardd's beacon beside socket every 20 ms (whole, by rename),
// its last STATUS of key passed, until the test ends.
func keepBeating(t *testing.T, socket, key string) {
	stop := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() {
		close(stop)
		<-done
	})
	go func() {
		defer close(done)
		for {
			tmp := socket + ".alive.tmp"
			if os.WriteFile(tmp, beat(time.Now(), protocolVersion, true, `{"`+key+`":true}`), 0o600) == nil {
				_ = os.Rename(tmp, socket+aliveBeaconSuffix)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
}

// A stewardd whose listen backlog is full (a DEL storm on a busy node: connect(2) fails at once with
// EAGAIN) is busy, not gone: STATUS reads its beacon as for one that accepts and has not answered,
// and answers ready while the beacon beats, rather than 50 at once.
func TestSTATUSOnAFullListenBacklogIsAnsweredByTheBeaconAsOnAnUnansweredOne(t *testing.T) {
	backlog, _ := fullBacklog(t)
	unanswered := fakeStewardd(t, func(_ net.Conn, _ *bufio.Reader, _ int, done <-chan struct{}) { <-done })
	for name, socket := range map[string]string{"a full listen backlog": backlog, "accepted, never answered": unanswered} {
		start := time.Now()
		in := input{env: env{"CNI_COMMAND": "STATUS", "CNI_PATH": "/p"}, stdin: []byte(`{"cniVersion":"1.1.0","name":"n","socket":"` + socket + `"}`),
			elapsed: func() time.Duration { return time.Since(start) }, beacon: readBeacon}
		req, cerr := readRequest(in)
		if cerr != nil {
			t.Fatal(cerr.Msg)
		}
		keepBeating(t, socket, req.statusKey)
		out, code := run(in, postUnix, nil)
		if took := time.Since(start); code != 0 || len(out) != 0 || took < statusBeaconPatience || took >= statusBound {
			t.Errorf("%s: exit %d %s after %v, want 0 from the beacon, between %v and %v", name, code, out, took, statusBeaconPatience, statusBound)
		}
	}
}
