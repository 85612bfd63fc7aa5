// A planned restart seen from the shim: the record's freshness, and what each command does while
// it covers stewardd's absence (restart.go, run.go deliver).

package main

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestARestartRecordCoversOnlyItsOwnBootAndUntilItsDeadline(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	rec := func(boot string, until time.Time) []byte {
		return []byte(`{"bootId":"` + boot + `","until":` + strconv.FormatInt(until.UnixMilli(), 10) + `,"pid":7}`)
	}
	boot := []byte("0b5e\n")
	for _, c := range []struct {
		name    string
		record  []byte
		written time.Time
		want    time.Duration
	}{
		{"fresh", rec("0b5e", now.Add(5*time.Second)), now, 5 * time.Second},
		{"another boot's", rec("1111", now.Add(5*time.Second)), now, 0},
		{"past its deadline", rec("0b5e", now.Add(-time.Millisecond)), now, 0},
		{"promising more than the longest grace", rec("0b5e", now.Add(time.Hour)), now, maxRestartGrace},
		// Believed for the longest grace after it was written, not a grace from each call's now.
		{"promising more, written 100 s ago", rec("0b5e", now.Add(time.Hour)), now.Add(-100 * time.Second), maxRestartGrace - 100*time.Second},
		{"promising more, written a grace ago", rec("0b5e", now.Add(time.Hour)), now.Add(-maxRestartGrace), 0},
		{"within its deadline, written long ago", rec("0b5e", now.Add(5*time.Second)), now.Add(-time.Hour), 0},
		{"written a little ahead of this clock", rec("0b5e", now.Add(5*time.Second)), now.Add(time.Minute), 5 * time.Second},
		{"written far ahead of this clock", rec("0b5e", now.Add(5*time.Second)), now.Add(time.Hour), 0},
		{"absent", nil, now, 0},
		{"not JSON", []byte("{"), now, 0},
	} {
		if got := recordLeft(c.record, c.written, boot, now); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if got := recordLeft(rec("", now.Add(time.Second)), now, nil, now); got != 0 {
		t.Errorf("no boot id on the node: %v", got)
	}
}

// The record as the shim reads it from the node: its mtime is when it was written, so a record whose
// deadline is far off stops covering a missing stewardd once it is older than the longest grace.
func TestARestartRecordOnDiskIsBelievedForAtMostTheLongestGraceAfterItWasWritten(t *testing.T) {
	boot := readSmall(bootIDFile)
	if len(boot) == 0 {
		t.Skip("no kernel boot id on this machine")
	}
	sock := t.TempDir() + "/s.sock"
	path := sock + restartRecordSuffix
	until := time.Now().Add(24 * time.Hour).UnixMilli()
	body := `{"bootId":"` + strings.TrimSpace(string(boot)) + `","until":` + strconv.FormatInt(until, 10) + `,"pid":7}`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if left, seen := restartRecordLeft(sock); !seen || left <= maxRestartGrace-time.Minute || left > maxRestartGrace {
		t.Fatalf("just written: left %v seen %v, want about %v", left, seen, maxRestartGrace)
	}
	old := time.Now().Add(-maxRestartGrace - time.Second)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	if left, seen := restartRecordLeft(sock); !seen || left != 0 {
		t.Fatalf("written more than a grace ago: left %v seen %v, want 0 and seen", left, seen)
	}
}

// restartCall runs one call whose sender answers from replies in turn (the last repeats), with a
// restart record that covers `left` (0: none) and a clock that the shim's sleeps advance.
func restartCall(t *testing.T, command string, left time.Duration, replies ...func() (reply, error)) (out []byte, code int, sends int, spooled int, slept time.Duration) {
	t.Helper()
	e := env{"CNI_COMMAND": command, "CNI_CONTAINERID": "abc", "CNI_NETNS": "/n", "CNI_IFNAME": "eth0", "CNI_PATH": "/p"}
	send := func(socket, route string, body []byte, timeout time.Duration, headers [][2]string) (reply, error) {
		i := min(sends, len(replies)-1)
		sends++
		return replies[i]()
	}
	spool := func(dir, id string, body []byte) (string, error) { spooled++; return dir, nil }
	in := input{env: e, stdin: []byte(`{"cniVersion":"1.1.0","name":"n","timeouts":{"add":2000}}`),
		elapsed: func() time.Duration { return slept },
		restart: func(string) (time.Duration, bool) { return max(0, left-slept), left > 0 },
		sleep:   func(d time.Duration) { slept += d }}
	out, code = run(in, send, spool)
	return out, code, sends, spooled, slept
}

var (
	gone    = func() (reply, error) { return reply{}, &unreachableError{reason: "ENOENT"} }
	frozen  = func() (reply, error) { return reply{}, &unreachableError{reason: "timed out", timeout: true} }
	closing = func() (reply, error) {
		return daemonAnswer(503, `{"code":11,"msg":"stewardd is shutting down; try again later"}`)
	}
	notReady = func() (reply, error) {
		return daemonAnswer(503, `{"code":50,"msg":"stewardd is not ready (see /readyz)"}`)
	}
	added = func() (reply, error) { return daemonAnswer(200, `{"cniVersion":"1.1.0","ips":[]}`) }
)

func daemonAnswer(status int, body string) (reply, error) {
	return reply{status: status, body: []byte(body), protocol: "2", hasProtocol: true}, nil
}

func TestSTATUSIsReadyWhileARestartRecordCoversAMissingOrClosingStewardd(t *testing.T) {
	for name, r := range map[string]func() (reply, error){"socket gone": gone, "shutting down": closing, "not ready yet": notReady} {
		out, code, _, _, _ := restartCall(t, "STATUS", 10*time.Second, r)
		if code != 0 || len(out) != 0 {
			t.Errorf("%s: %d %s", name, code, out)
		}
		// Without a record the same answer is 50 at once.
		out, code, sends, _, _ := restartCall(t, "STATUS", 0, r)
		if code != 1 || !strings.Contains(string(out), `"code":50`) || sends != 1 {
			t.Errorf("%s without a record: %d %s (%d sends)", name, code, out, sends)
		}
	}
	// A frozen stewardd is no restart, record or not.
	if out, code, _, _, _ := restartCall(t, "STATUS", 10*time.Second, frozen); code != 1 || !strings.Contains(string(out), `"code":50`) {
		t.Errorf("frozen: %d %s", code, out)
	}
}

func TestAnADDDuringARestartWaitsForTheSuccessor(t *testing.T) {
	out, code, sends, _, slept := restartCall(t, "ADD", 10*time.Second, gone, closing, gone, added)
	if code != 0 || !strings.Contains(string(out), `"ips"`) || sends != 4 || slept != 3*restartPoll {
		t.Errorf("%d %s: %d sends, slept %v", code, out, sends, slept)
	}
	// A successor that never comes: 11 once the ADD's own bound (2 s here) is spent, not before.
	out, code, sends, _, slept = restartCall(t, "ADD", 10*time.Second, gone)
	if code != 1 || !strings.Contains(string(out), `"code":11`) || slept < 2*time.Second-restartPoll || slept > 2*time.Second {
		t.Errorf("%d %s: %d sends, slept %v", code, out, sends, slept)
	}
	// The record's deadline ends the wait first when it is nearer.
	_, code, _, _, slept = restartCall(t, "ADD", 350*time.Millisecond, gone)
	if code != 1 || slept != 350*time.Millisecond {
		t.Errorf("%d, slept %v", code, slept)
	}
}

func TestADELDuringARestartIsSpooledAtOnceAndNothingWaitsWithoutARecord(t *testing.T) {
	_, code, sends, spooled, slept := restartCall(t, "DEL", 10*time.Second, gone)
	if code != 0 || sends != 1 || spooled != 1 || slept != 0 {
		t.Errorf("DEL: %d, %d sends, %d spooled, slept %v", code, sends, spooled, slept)
	}
	out, code, sends, _, slept := restartCall(t, "ADD", 0, gone)
	if code != 1 || !strings.Contains(string(out), `"code":11`) || sends != 1 || slept != 0 {
		t.Errorf("ADD without a record: %d %s, %d sends, slept %v", code, out, sends, slept)
	}
}

func TestASTATUSAnsweredNotReadyByTheShimIsNotedWithWhy(t *testing.T) {
	e := env{"CNI_COMMAND": "STATUS", "CNI_PATH": "/p"}
	for _, c := range []struct {
		answer func() (reply, error)
		seen   bool
		why    string
		noted  bool
	}{
		{gone, false, "unreachable", true},
		{gone, true, "grace expired", true},
		{frozen, false, "frozen", true},
		{notReady, false, "", false}, // stewardd answered: it knows, and says so itself
	} {
		var notes [][3]string
		in := input{env: e, stdin: []byte(`{"cniVersion":"1.1.0","name":"n","socket":"/s/sock"}`), elapsed: zero,
			restart:      func(string) (time.Duration, bool) { return 0, c.seen },
			noteNotReady: func(socket, why, msg string) { notes = append(notes, [3]string{socket, why, msg}) }}
		out, code := run(in, func(string, string, []byte, time.Duration, [][2]string) (reply, error) { return c.answer() }, nil)
		if code != 1 || !strings.Contains(string(out), `"code":50`) {
			t.Errorf("%s: %d %s", c.why, code, out)
		}
		if c.noted != (len(notes) == 1) || (c.noted && (notes[0][0] != "/s/sock" || notes[0][1] != c.why || !strings.Contains(string(out), notes[0][2]))) {
			t.Errorf("%q: notes %q", c.why, notes)
		}
	}
}

func TestTheNotReadyNoteIsWrittenBesideTheSocket(t *testing.T) {
	dir := t.TempDir()
	socket := dir + "/s.sock"
	writeNotReadyNote(socket, "frozen", "no answer")
	var note struct {
		At     int64  `json:"at"`
		Why    string `json:"why"`
		Reason string `json:"reason"`
	}
	b := readSmall(socket + statusNotReadySuffix)
	if json.Unmarshal(b, &note) != nil || note.Why != "frozen" || note.Reason != "no answer" || note.At < time.Now().Add(-time.Minute).UnixMilli() {
		t.Errorf("%s", b)
	}
	writeNotReadyNote(dir+"/gone/s.sock", "unreachable", "x") // no directory: nothing, no panic
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%v", entries)
	}
}

// The not-ready note is written through a temp file that must be new: a link left at that name (the
// socket's directory writable by someone else) is removed, never written through.
func TestTheNotReadyNoteNeverWritesThroughALinkAtItsTempName(t *testing.T) {
	dir := t.TempDir()
	sock := dir + "/s.sock"
	victim := dir + "/victim"
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := sock + statusNotReadySuffix + ".tmp" + strconv.Itoa(os.Getpid())
	if err := os.Symlink(victim, tmp); err != nil {
		t.Fatal(err)
	}
	writeNotReadyNote(sock, "unreachable", "stewardd is unreachable")
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("the link's target was written: %q", b)
	}
	note := readSmall(sock + statusNotReadySuffix)
	var got struct{ Why, Reason string }
	if json.Unmarshal(note, &got) != nil || got.Why != "unreachable" || got.Reason != "stewardd is unreachable" {
		t.Errorf("note %q", note)
	}
	if _, err := os.Lstat(tmp); !os.IsNotExist(err) {
		t.Errorf("the temp name is left: %v", err)
	}
}

// "grace expired" is only for a restart record that was one: this boot's, parsed, not written in the
// future. Anything else at the record's path was never believed, and a STATUS that finds stewardd gone
// beside it says "unreachable" (the note said "grace expired" for any file with content there).
func TestOnlyARecordOfThisBootIsSeenAndNotedAsAGraceThatExpired(t *testing.T) {
	boot := strings.TrimSpace(string(readSmall(bootIDFile)))
	past := strconv.FormatInt(time.Now().Add(-time.Minute).UnixMilli(), 10)
	for _, c := range []struct {
		name, record string
		ahead        time.Duration // of its mtime
		seen         bool
		why          string
	}{
		{"another boot's", `{"bootId":"another-boot","until":` + past + `}`, 0, false, "unreachable"},
		{"not JSON", `garbage`, 0, false, "unreachable"},
		{"without a boot id", `{"until":` + past + `}`, 0, false, "unreachable"},
		{"this boot's, written in the future", `{"bootId":"` + boot + `","until":` + past + `}`, time.Hour, false, "unreachable"},
		{"this boot's, its grace over", `{"bootId":"` + boot + `","until":` + past + `}`, 0, true, "grace expired"},
	} {
		if boot == "" && c.seen {
			continue // no kernel boot id on this machine: no record is this boot's
		}
		sock := shortTempDir(t) + "/s.sock"
		path := sock + restartRecordSuffix
		if err := os.WriteFile(path, []byte(c.record), 0o600); err != nil {
			t.Fatal(err)
		}
		if c.ahead != 0 {
			at := time.Now().Add(c.ahead)
			if err := os.Chtimes(path, at, at); err != nil {
				t.Fatal(err)
			}
		}
		if left, seen := restartRecordLeft(sock); left != 0 || seen != c.seen {
			t.Errorf("%s: left %v seen %v, want 0 and seen %v", c.name, left, seen, c.seen)
		}
		var whys []string
		in := input{env: env{"CNI_COMMAND": "STATUS", "CNI_PATH": "/p"}, stdin: []byte(`{"cniVersion":"1.1.0","name":"n","socket":"` + sock + `"}`),
			elapsed: zero, restart: restartRecordLeft, sleep: func(time.Duration) {},
			noteNotReady: func(_, why, _ string) { whys = append(whys, why) }}
		out, code := run(in, func(string, string, []byte, time.Duration, [][2]string) (reply, error) { return gone() }, nil)
		if code != 1 || !strings.Contains(string(out), `"code":50`) || len(whys) != 1 || whys[0] != c.why {
			t.Errorf("%s: %d %s, noted %q, want %q", c.name, code, out, whys, c.why)
		}
	}
}
