// The shim's whole logic as a function of its inputs: env + stdin in, stdout + exit code out.
// The socket request, the spool and the clock are injected, so go test drives it with plain
// values (shared/vectors/) and main.go only wires the process into it. One call is three steps:
// readRequest (the environment and the netconf, checked), deliver (the request to stewardd, or
// the spool when it cannot take a DEL) and readAnswer (stewardd's answer as the runtime gets it).

package main

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"
)

// input is one call: the environment, stdin as read (at most maxNetconfBytes + 1 bytes: more
// means over the bound), and the time since the process started.
type input struct {
	env     env
	stdin   []byte
	elapsed func() time.Duration
	// restart tells whether a planned restart of stewardd covers its absence (restart.go); nil:
	// never. sleep waits between looks for the successor (time.Sleep unless a test says).
	restart restartLeft
	sleep   func(time.Duration)
	// noteNotReady records a STATUS the shim answered not ready on its own (nil: not recorded).
	noteNotReady notReadyNote
	// beacon reads stewardd's alive beacon for a STATUS it is slow to answer (beacon.go); nil:
	// never.
	beacon beaconRead
	// warn tells the runtime's log (stderr) what an exit 0 does not show; nil: nothing is written.
	warn func(string)
	// unspool removes a DEL the shim spooled and then saw answered (nil: it stays, and its repeat is
	// answered from stewardd's tombstone).
	unspool func(path string) error
}

// request is one call, read and checked: what to send to which socket, within what bound.
type request struct {
	command     string
	containerID string
	cniVersion  string // the version errors are written in
	conf        *netconf
	wire        env // the CNI_* variables forwarded
	body        []byte
	socket      string
	spoolDir    string
	bound       bound
	trace       [][2]string // the runtime's trace context, as headers
	statusKey   string      // STATUS: its network's name in stewardd's alive beacon (beacon.go)
}

// run answers one call; whatever goes wrong, the runtime gets a CNI error on stdout.
func run(in input, send sender, spool spooler) (stdout []byte, code int) {
	stdout, code = answer(in, send, spool)
	// containerd's go-cni reads "not found" or "no such file or directory" in a DEL error as
	// success: every DEL failure leaves here without those words, whoever wrote it.
	if in.env.get("CNI_COMMAND") == "DEL" && code != 0 {
		stdout = failureSafe(stdout)
	}
	return stdout, code
}

func answer(in input, send sender, spool spooler) ([]byte, int) {
	if in.env.get("CNI_COMMAND") == "VERSION" {
		return versionAnswer(in.stdin), 0
	}
	req, err := readRequest(in)
	if err != nil {
		return err.encode(req.cniVersion), 1
	}
	r, err := deliver(req, in, send, spool)
	if err != nil {
		return forStatus(req, err).encode(req.cniVersion), 1
	}
	if r == nil { // a DEL spooled (stewardd carries it out when it is back), or STATUS through a restart
		return nil, 0
	}
	// A DEL refused with an answer the shim cannot use is spooled, as one given no answer.
	if e := unusableAnswer(req, *r); e != nil && req.command == "DEL" {
		if serr := spoolUnusable(req, e.Msg, spool, in.warn); serr != nil {
			return serr.encode(req.cniVersion), 1
		}
		return nil, 0
	}
	return readAnswer(req, *r)
}

// versionAnswer: its own version, the one asked for when this shim speaks it, else its newest
// (as the reference plugins answer), never an echo of whatever string came in.
func versionAnswer(stdin []byte) []byte {
	own := latestVersion
	if len(stdin) <= maxNetconfBytes {
		if conf, _ := decodeNetconf(stdin); conf != nil {
			if v, _ := conf.str("cniVersion"); isSupported(v) {
				own = v
			}
		}
	}
	return encodeJSON(struct {
		CniVersion        string   `json:"cniVersion"`
		SupportedVersions []string `json:"supportedVersions"`
	}{own, supportedVersions[:]})
}

func isSupported(v string) bool {
	for _, s := range supportedVersions {
		if s == v {
			return true
		}
	}
	return false
}

// readRequest checks the environment, then the netconf and the shim's own keys, and builds the
// request. On error the request still carries the version to write it in.
func readRequest(in input) (request, *cniError) {
	req := request{cniVersion: latestVersion}
	overBound := len(in.stdin) > maxNetconfBytes
	var decodeErr *cniError
	if !overBound {
		req.conf, decodeErr = decodeNetconf(in.stdin)
		req.cniVersion = req.conf.cniVersion()
	}
	ce, err := parseCNIEnv(in.env)
	if err != nil {
		return req, err
	}
	req.command, req.containerID = ce.command, ce.containerID
	switch {
	case overBound:
		return req, newError(codeInvalidConfig, "netconf on stdin is larger than "+strconv.Itoa(maxNetconfBytes)+" bytes")
	case decodeErr != nil:
		return req, decodeErr
	case req.conf == nil:
		return req, newError(codeDecodeFailure, "no netconf on stdin")
	}

	// The shim's own keys. A bad one is code 7, except on DEL: a DEL refused for them would fail
	// on every retry and pin the sandbox (stewardd tears down from the ADD's stored config
	// anyway), so a DEL falls back to the default of each key it cannot use.
	lenient := req.command == "DEL"
	req.socket = defaultSocket
	if req.conf.present("socket") {
		s, isString := req.conf.str("socket")
		if why := socketProblem(s, isString); why == "" {
			req.socket = s
		} else if !lenient {
			return req, newError(codeInvalidConfig, why)
		}
	}
	req.spoolDir = defaultSpoolDir
	if req.conf.present("spoolDir") {
		s, isString := req.conf.str("spoolDir")
		if spoolDirOK(s, isString) {
			req.spoolDir = s
		} else if !lenient {
			return req, newError(codeInvalidConfig, `"spoolDir" must be an absolute path`)
		}
	}

	req.wire = env{}
	for _, name := range cniEnvVars {
		if v, ok := in.env[name]; ok {
			req.wire[name] = v
		}
	}
	body, berr := requestBody(req.wire, req.conf)
	if berr != nil {
		return req, newError(codeInvalidConfig, "netconf on stdin cannot be forwarded: "+berr.Error())
	}
	// What stewardd reads at most: a bigger request could only be refused, and a DEL spooled
	// that big would be set aside at ingest and never run.
	if len(body) > maxRequestBytes {
		return req, newError(codeInvalidConfig, "the request (netconf and CNI_* variables) is "+strconv.Itoa(len(body))+
			" bytes, more than the "+strconv.Itoa(maxRequestBytes)+" stewardd reads")
	}
	req.body = body
	if req.command == "STATUS" {
		req.statusKey = statusKey(body)
	}

	timeouts, hasTimeouts := req.conf.keys["timeouts"]
	if !hasTimeouts {
		timeouts = nil
	}
	b, boundErr := commandBound(req.command, timeouts, in.elapsed())
	if boundErr != nil {
		if !lenient {
			return req, boundErr
		}
		b, _ = commandBound(req.command, nil, in.elapsed())
	}
	req.bound = b
	req.trace = traceHeaders(in.env)
	return req, nil
}

// headers: the admission hints, the protocol version, the trace context and a STATUS's key.
func (req request) headers(wire env) [][2]string {
	h := append(hintHeaders(wire, req.conf), req.trace...)
	if req.statusKey != "" {
		h = append(h, [2]string{statusKeyHeader, req.statusKey})
	}
	return h
}

// deliver sends the request. It returns stewardd's answer; nil and no error when a DEL was
// spooled instead (stewardd drains the spool when it is back, per container, before that
// container's next ADD: the teardown is only postponed), or when STATUS found stewardd in a
// planned restart (the network is no less ready for it).
func deliver(req request, in input, send sender, spool spooler) (*reply, *cniError) {
	// STATUS goes on: the alive beacon answers it when stewardd cannot within 1 ms.
	if req.bound.spent && req.command != "STATUS" {
		return nil, boundSpent(req, in, spool)
	}
	start := in.elapsed()
	remaining := req.bound.remaining
	if req.command == "STATUS" && in.beacon != nil {
		send = withBeacon(send, in, req.statusKey)
	}
	var r reply
	var err error
	for {
		r, err = send(req.socket, cniRoute, req.body, remaining, req.headers(req.wire))
		if req.command == "DEL" || in.restart == nil || !restartGap(err, r) {
			break
		}
		left, _ := in.restart(req.socket)
		if left <= 0 {
			break
		}
		if req.command == "STATUS" {
			return nil, nil
		}
		// ADD, CHECK, GC: the successor is coming; look again, within the record and the bound.
		waited := in.elapsed() - start
		if waited+restartPoll >= req.bound.remaining {
			break
		}
		in.sleep(min(restartPoll, left))
		remaining = req.bound.remaining - (in.elapsed() - start)
	}
	if err != nil {
		return nil, sendFailed(req, in, err, send, spool)
	}
	if skew := versionSkew(req.command, r, req.socket); skew != nil {
		// A DEL must never be lost: stewardd replays the spool when it starts, i.e. once the
		// DaemonSet is rolled to the shim's release (an older daemon that served it answered 200).
		if req.command == "DEL" && r.status != 200 {
			if _, serr := spool(req.spoolDir, req.containerID, req.body); serr == nil {
				return nil, nil
			}
		}
		// An older stewardd carried the ADD out (its delegates allocated) before its answer showed
		// the skew: the runtime is told the ADD failed and sends no DEL after that (containerd
		// 1.6.37+, 1.7.23+, 2.x), so the shim undoes it itself before answering.
		if req.command == "ADD" && r.status == 200 {
			skew.Msg += "; " + undoAdd(req, in, send, spool, "when stewardd next starts")
		}
		return nil, skew
	}
	// An ADD's answer is its result: libcni would fail on anything else after the interfaces
	// exist, and the runtime sends no DEL after that failure, so the shim undoes the ADD. Any 2xx
	// means stewardd carried it out (statusOf), a complete one other than 200 too.
	if req.command == "ADD" && r.status/100 == 2 && (r.status != 200 || !isJSONObject(r.body)) {
		what := "a body that is not a JSON object"
		if r.status != 200 {
			what = "no result (200 carries one)"
		}
		return nil, &cniError{Code: codeInternal, Msg: "stewardd at " + req.socket + " answered the ADD with " + strconv.Itoa(r.status) + " and " + what + "; " +
			undoAdd(req, in, send, spool, spooledByLiveDaemon), Details: firstChars(string(r.body), 200)}
	}
	return &r, nil
}

// sendFailed: what the runtime hears when no usable answer came back; nil when a DEL was spooled.
func sendFailed(req request, in input, err error, send sender, spool spooler) *cniError {
	if req.command == "ADD" && statusOf(err)/100 == 2 {
		return lostAddAnswer(req, in, err, send, spool)
	}
	var u *unreachableError
	var bad *badAnswerError
	switch {
	case errors.As(err, &u):
		e := unreachableOutcome(req, u, spool)
		if req.command == "STATUS" && in.noteNotReady != nil {
			in.noteNotReady(req.socket, notReadyWhy(req, u, in.restart), e.Msg)
		}
		return e
	case errors.As(err, &bad):
		why := "stewardd at " + req.socket + " answered, but not with a usable HTTP answer: " + bad.reason
		if req.command == "DEL" {
			return spoolUnusable(req, why, spool, in.warn)
		}
		return newError(codeInternal, why)
	}
	return newError(codeInternal, "steward shim: the request to stewardd at "+req.socket+" failed: "+err.Error())
}

// spooledByLiveDaemon: when a spooled DEL runs if stewardd is serving (its scheduler reads the spool).
const spooledByLiveDaemon = "when stewardd next reads its spool"

// lostAddAnswer: an ADD stewardd answered with a 2xx status line whose answer then was cut off or
// could not be read. stewardd carried it out (its delegates ran, its journal committed); the
// runtime, told it failed, sends no DEL after it (containerd 1.6.37+, 1.7.23+, 2.x), so the
// shim undoes it as it does a skewed ADD. stewardd answered: it is not called unreachable.
func lostAddAnswer(req request, in input, err error, send sender, spool spooler) *cniError {
	head := "stewardd at " + req.socket + " answered the ADD with HTTP " + strconv.Itoa(statusOf(err))
	undo := undoAdd(req, in, send, spool, spooledByLiveDaemon)
	var u *unreachableError
	if errors.As(err, &u) {
		// Cut off (stewardd died or froze mid-answer): transient, as no answer at all is.
		reason := u.reason
		if u.timeout {
			reason = "the rest of it not within " + req.bound.label
		}
		return newError(codeTryAgainLater, head+", but the answer was cut off ("+reason+"); "+undo+"; try again later")
	}
	return newError(codeInternal, head+", but not with a usable HTTP answer: "+err.Error()+"; "+undo)
}

// spoolUnusable spools a DEL whose answer the shim cannot use, as one that got no answer: stewardd
// may or may not have torn down, and a repeat DEL is harmless (its tombstones answer it). nil when
// it was spooled; warn says why.
func spoolUnusable(req request, why string, spool spooler, warn func(string)) *cniError {
	path, err := spool(req.spoolDir, req.containerID, req.body)
	if err != nil {
		return newError(codeTryAgainLater, why+"; the DEL could not be spooled to "+req.spoolDir+": "+err.Error())
	}
	if warn != nil {
		warn(why + "; the DEL was spooled to " + path + " and is carried out " + spooledByLiveDaemon)
	}
	return nil
}

// notReadyWhy names why STATUS found stewardd unavailable: frozen (no answer within the bound),
// grace expired (a restart record of this boot was there, but its successor never served in time), or
// unreachable (gone: a crash, kill -9, never started).
func notReadyWhy(req request, u *unreachableError, restart restartLeft) string {
	if u.timeout {
		return "frozen"
	}
	if restart != nil {
		if _, seen := restart(req.socket); seen {
			return "grace expired"
		}
	}
	return "unreachable"
}

// restartGap: what stewardd's restart looks like from the shim: its socket gone or refusing (not
// a frozen one: no answer within the bound is no restart), or stewardd answering that it is
// shutting down or not ready yet (11, 50). Nothing was run for such an answer.
func restartGap(err error, r reply) bool {
	if err != nil {
		var u *unreachableError
		return errors.As(err, &u) && !u.timeout
	}
	if r.status == 200 {
		return false
	}
	e, _, ok := daemonError(r.body)
	return ok && (e.Code == codeTryAgainLater || e.Code == codePluginNotAvailable)
}

// unreachableOutcome: what the runtime hears when stewardd could not be reached or did not answer
// in full within the bound. nil when a DEL was spooled.
func unreachableOutcome(req request, u *unreachableError, spool spooler) *cniError {
	reason := u.reason
	if u.timeout {
		reason = "no answer within " + req.bound.label
	}
	where := "stewardd is unreachable at " + req.socket + " (" + reason + ")"
	switch req.command {
	case "STATUS":
		return newError(codePluginNotAvailable, where)
	case "DEL":
		if _, serr := spool(req.spoolDir, req.containerID, req.body); serr != nil {
			return newError(codeTryAgainLater, where+" and the DEL could not be spooled to "+req.spoolDir+": "+serr.Error())
		}
		return nil
	}
	return newError(codeTryAgainLater, where+"; try again later")
}

// readAnswer: stewardd's answer as the runtime gets it. A 200 is printed as it came (a CHECK's is
// empty, or an object; an ADD's is a JSON object, deliver saw to it); a CNI error keeps its words,
// unless its code is one the command cannot have (unfitCode); anything else is 104 naming stewardd.
func readAnswer(req request, r reply) ([]byte, int) {
	if r.status == 200 {
		// A CHECK's answer is nothing (CNI spec) or an object, never a fragment (an ADD's: deliver).
		if req.command == "CHECK" && len(r.body) > 0 && !isJSONObject(r.body) {
			return (&cniError{Code: codeInternal, Msg: "stewardd at " + req.socket + " answered the " + req.command +
				" with 200 and a body that is not a JSON object", Details: firstChars(string(r.body), 200)}).encode(req.cniVersion), 1
		}
		return r.body, 0
	}
	if bad := unusableAnswer(req, r); bad != nil {
		return forStatus(req, bad).encode(req.cniVersion), 1
	}
	e, _, _ := daemonError(r.body)
	// STATUS: whatever keeps stewardd from serving (degraded, not ready, shutting down: 11;
	// its own bug: 104) means "the plugin is not available" to the runtime; a fault in the
	// request itself (its version, environment or netconf) keeps its own code.
	if req.command == "STATUS" && (e.Code == codeTryAgainLater || e.Code == codeInternal) {
		return newError(codePluginNotAvailable, "stewardd is not available: "+e.Msg).encode(req.cniVersion), 1
	}
	return r.body, 1
}

// unusableAnswer: the 104 naming stewardd for a non-200 answer the shim cannot use (no CNI error in
// it, or one whose code no command can have); nil for a 200 or a usable CNI error.
func unusableAnswer(req request, r reply) *cniError {
	if r.status == 200 {
		return nil
	}
	if code, e, unfit := unfitCode(r.body); unfit {
		return &cniError{Code: codeInternal, Msg: "stewardd at " + req.socket + " answered with code " + code + ", which " +
			article(req.command) + " cannot have: " + e.Msg, Details: e.Details}
	}
	if _, _, ok := daemonError(r.body); !ok {
		return &cniError{Code: codeInternal, Msg: "stewardd answered HTTP " + strconv.Itoa(r.status) + " without a CNI error",
			Details: firstChars(string(r.body), 200)}
	}
	return nil
}

// unfitCode: stewardd's CNI error when its code is one no command can have, with that code as sent:
// not an integer from 1 (0, -3, 3.5, 1e400). unfit is false for any other answer: every whole code
// from 1 (the spec's, steward's own, a delegate's passed through) is left as it is.
func unfitCode(body []byte) (code string, e *cniError, unfit bool) {
	var obj map[string]json.RawMessage
	e = &cniError{}
	if json.Unmarshal(body, &obj) != nil || !isJSONNumber(obj["code"]) || !isJSONString(obj["msg"]) ||
		json.Unmarshal(obj["msg"], &e.Msg) != nil {
		return "", nil, false
	}
	// Any whole code from 1 is passed on: stewardd passes its delegates' own codes through as sent.
	if json.Unmarshal(obj["code"], &e.Code) == nil && e.Code >= 1 {
		return "", nil, false
	}
	if isJSONString(obj["details"]) {
		_ = json.Unmarshal(obj["details"], &e.Details)
	}
	return string(obj["code"]), e, true
}

// article: the command with its indefinite article ("an ADD", "a DEL").
func article(command string) string {
	if command == "ADD" {
		return "an ADD"
	}
	return "a " + command
}

// forStatus: to a runtime asking STATUS, a stewardd whose answer the shim cannot use is a plugin
// not available (50, which containerd reads as network not ready), not the shim's own fault (104).
func forStatus(req request, e *cniError) *cniError {
	if req.command != "STATUS" || e.Code != codeInternal {
		return e
	}
	return &cniError{Code: codePluginNotAvailable, Msg: "stewardd is not available: " + e.Msg, Details: e.Details}
}

func isJSONObject(b []byte) bool {
	var obj map[string]json.RawMessage
	return json.Unmarshal(b, &obj) == nil && obj != nil
}

// undoAdd sends the DEL of an ADD stewardd carried out though the runtime is told it failed (an
// older stewardd's, or one whose answer was lost), within the DEL's own bound as the runtime would
// have sent it (a whole one: the ADD's bound is spent, and both fit inside the kubelet's 4 minutes).
// The DEL is spooled first: a runtime whose own deadline kills the shim while it waits for stewardd
// leaves the undo on disk, not lost. A DEL answered 200 takes its spooled copy back (in.unspool); a
// copy left behind is answered from stewardd's tombstone. It says which (a spooled DEL runs later).
func undoAdd(req request, in input, send sender, spool spooler, later string) string {
	del := env{}
	for k, v := range req.wire {
		del[k] = v
	}
	del["CNI_COMMAND"] = "DEL"
	body, err := requestBody(del, req.conf)
	if err != nil {
		return "its ADD could not be undone: " + err.Error()
	}
	path, serr := spool(req.spoolDir, req.containerID, body)
	if r, err := send(req.socket, cniRoute, body, delBound, req.headers(del)); err == nil && r.status == 200 {
		if serr == nil && path != "" && in.unspool != nil {
			_ = in.unspool(path)
		}
		return "the ADD it carried out was undone (DEL answered)"
	}
	if serr != nil {
		return "its ADD could not be undone (the DEL failed and could not be spooled: " + serr.Error() + ")"
	}
	return "the ADD it carried out is undone by a spooled DEL " + later
}

// boundSpent: the answer when reading stdin used up the whole bound before stewardd could be asked.
// Nothing is sent (stewardd could only carry out an ADD the shim no longer waits for); a DEL is
// spooled, as one stewardd does not answer in time is. nil when it was.
func boundSpent(req request, in input, spool spooler) *cniError {
	why := req.bound.label + " was used up reading stdin (" + strconv.FormatInt(in.elapsed().Milliseconds(), 10) +
		" ms since the shim started) before stewardd was asked"
	if req.command == "DEL" {
		if _, serr := spool(req.spoolDir, req.containerID, req.body); serr != nil {
			return newError(codeTryAgainLater, why+", and the DEL could not be spooled to "+req.spoolDir+": "+serr.Error())
		}
		if in.warn != nil {
			in.warn(why + "; the DEL was spooled and is carried out " + spooledByLiveDaemon)
		}
		return nil
	}
	return newError(codeTryAgainLater, why+"; nothing was sent; try again later")
}

// firstChars: the first n characters of s.
func firstChars(s string, n int) string {
	i := 0
	for at := range s {
		if i == n {
			return s[:at]
		}
		i++
	}
	return s
}

// versionSkew: a CNI error when stewardd speaks another protocol version: it refused this shim
// (108), or it sent no version at all (a release before versions; its answer is not trusted,
// except a DEL's 200: the teardown was done). STATUS answers 50 with the same text.
func versionSkew(command string, r reply, socket string) *cniError {
	code := codeVersionSkew
	if command == "STATUS" {
		code = codePluginNotAvailable
	}
	if !r.hasProtocol {
		if command == "DEL" && r.status == 200 {
			return nil
		}
		return newError(code, "version skew: this shim speaks protocol "+strconv.Itoa(protocolVersion)+", stewardd at "+socket+
			" speaks protocol "+strconv.Itoa(unversionedProtocol)+" (a release before protocol versions; it sent no "+protocolHeader+
			" header); "+skewAdvice)
	}
	if r.status == 200 {
		return nil
	}
	e, _, _ := daemonError(r.body)
	if e == nil || e.Code != codeVersionSkew {
		return nil
	}
	return newError(code, e.Msg+" (this shim speaks protocol "+strconv.Itoa(protocolVersion)+"; stewardd at "+socket+
		" answered protocol "+r.protocol+")")
}

// failureSafe rewrites a DEL's failure so no runtime can read it as success.
func failureSafe(stdout []byte) []byte {
	e, v, ok := daemonError(stdout)
	if !ok {
		return []byte(failureSafeText(string(stdout)))
	}
	// The version as any error's (netconf.go versionShaped): stewardd's own string, passed on, would
	// otherwise be echoed whatever it is.
	if !versionShaped(v) {
		v = latestVersion
	}
	e.Msg, e.Details = failureSafeText(e.Msg), failureSafeText(e.Details)
	return e.encode(v)
}

// stdinBound: how long the shim waits for stdin to be written and closed, and its name: the
// command's default bound (the netconf, which could change it, is what is being read), what is
// left of it since the process started.
func stdinBound(e env, elapsed time.Duration) bound {
	command := e.get("CNI_COMMAND")
	switch command {
	case "VERSION": // answered by the shim itself, as fast as STATUS
		command = "STATUS"
	case "STATUS", "DEL":
	default:
		command = "ADD"
	}
	b, _ := commandBound(command, nil, elapsed)
	return b
}

// stdinNotClosed is the answer when stdin stayed open past its bound, which it names.
func stdinNotClosed(b bound) []byte {
	return newError(codeDecodeFailure, "stdin was not closed within "+b.label+": no netconf to act on").encode(latestVersion)
}
