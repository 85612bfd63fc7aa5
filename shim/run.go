// The shim's whole logic as a function of its inputs: env + stdin in, stdout + exit code out.
// The socket request, the spool and the clock are injected, so go test drives it with plain
// values (shared/vectors/) and main.go only wires the process into it.

package main

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// input is one call: the environment, stdin as read (at most maxNetconfBytes + 1 bytes: more
// means over the bound), and the time since the process started.
type input struct {
	env     env
	stdin   []byte
	elapsed func() time.Duration
}

// run answers one call; whatever goes wrong, the runtime gets a CNI error on stdout.
func run(in input, send sender, spool spooler) (stdout []byte, code int) {
	defer func() {
		if p := recover(); p != nil {
			stdout, code = newError(codeInternal, fmt.Sprintf("steward shim: unexpected error: %v", p)).encode(latestVersion), 1
		}
		// containerd's go-cni reads "not found" or "no such file or directory" in a DEL error as
		// success: every DEL failure leaves here without those words, whoever wrote it.
		if in.env.get("CNI_COMMAND") == "DEL" && code != 0 {
			stdout = failureSafe(stdout)
		}
	}()
	return answer(in, send, spool)
}

func failureSafe(stdout []byte) []byte {
	e, v, hasVersion := parseCNIError(stdout)
	if e == nil {
		return []byte(failureSafeText(string(stdout)))
	}
	if !hasVersion {
		v = latestVersion
	}
	// The version too: it can be the netconf's own string, echoed (found by FuzzCall).
	e.Msg, e.Details, v = failureSafeText(e.Msg), failureSafeText(e.Details), failureSafeText(v)
	return e.encode(v)
}

// stdinBound: how long the shim waits for stdin to be written and closed: the command's default
// bound (the netconf, which could change it, is what is being read), what is left of STATUS's.
func stdinBound(e env, elapsed time.Duration) time.Duration {
	command := "ADD"
	if e.get("CNI_COMMAND") == "STATUS" {
		command = "STATUS"
	}
	b, _ := commandBound(command, nil, elapsed)
	return b.remaining
}

// stdinNotClosed is the answer when stdin stayed open past stdinBound.
func stdinNotClosed(bound time.Duration) []byte {
	ms := strconv.FormatInt(int64((bound+time.Millisecond/2)/time.Millisecond), 10)
	return newError(codeDecodeFailure, "stdin was not closed within "+ms+" ms: no netconf to act on").encode(latestVersion)
}

func versionAnswer(cniVersion string) []byte {
	own := latestVersion
	for _, v := range supportedVersions {
		if v == cniVersion {
			own = v
		}
	}
	b := append([]byte(`{"cniVersion":`), appendJSONString(nil, own)...)
	b = append(b, `,"supportedVersions":[`...)
	for i, v := range supportedVersions {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, v)
	}
	return append(b, "]}"...)
}

func answer(in input, send sender, spool spooler) ([]byte, int) {
	overBound := len(in.stdin) > maxNetconfBytes
	var conf *netconf
	var decodeErr *cniError
	if !overBound {
		conf, decodeErr = decodeNetconf(in.stdin)
	}
	cniVersion := conf.cniVersion()

	if in.env.get("CNI_COMMAND") == "VERSION" {
		// Its own version: the one asked for when this shim speaks it, else its newest (as the
		// reference plugins answer), never an echo of whatever string came in.
		return versionAnswer(cniVersion), 0
	}
	fail := func(e *cniError) ([]byte, int) { return e.encode(cniVersion), 1 }

	ce, envErr := parseCNIEnv(in.env)
	if envErr != nil {
		return fail(envErr)
	}
	if overBound {
		return fail(newError(codeInvalidConfig, "netconf on stdin is larger than "+strconv.Itoa(maxNetconfBytes)+" bytes"))
	}
	if decodeErr != nil {
		return fail(decodeErr)
	}
	if conf == nil {
		return fail(newError(codeDecodeFailure, "no netconf on stdin"))
	}

	// The shim's own keys. A bad one is code 7, except on DEL: a DEL refused for them would fail
	// on every retry and pin the sandbox (stewardd tears down from the ADD's stored config
	// anyway), so a DEL falls back to the default of each key it cannot use.
	lenient := ce.command == "DEL"
	socket := defaultSocket
	if conf.present("socket") {
		s, isString := conf.str("socket")
		if why := socketProblem(s, isString); why == "" {
			socket = s
		} else if !lenient {
			return fail(newError(codeInvalidConfig, why))
		}
	}
	spoolDir := defaultSpoolDir
	if conf.present("spoolDir") {
		s, isString := conf.str("spoolDir")
		if spoolDirOK(s, isString) {
			spoolDir = s
		} else if !lenient {
			return fail(newError(codeInvalidConfig, `"spoolDir" must be an absolute path`))
		}
	}

	wire := env{}
	for _, name := range cniEnvVars {
		if v, ok := in.env[name]; ok {
			wire[name] = v
		}
	}
	body, err := requestBody(wire, conf)
	if err != nil {
		return fail(newError(codeInvalidConfig, "netconf on stdin cannot be forwarded: "+err.Error()))
	}
	// What stewardd reads at most: a bigger request could only be refused, and a DEL spooled
	// that big would be set aside at ingest and never run.
	if len(body) > maxRequestBytes {
		return fail(newError(codeInvalidConfig, "the request (netconf and CNI_* variables) is "+strconv.Itoa(len(body))+
			" bytes, more than the "+strconv.Itoa(maxRequestBytes)+" stewardd reads"))
	}

	elapsed := in.elapsed()
	timeouts, hasTimeouts := conf.keys["timeouts"]
	if !hasTimeouts {
		timeouts = nil
	}
	b, boundErr := commandBound(ce.command, timeouts, elapsed)
	if boundErr != nil {
		if !lenient {
			return fail(boundErr)
		}
		b, _ = commandBound(ce.command, nil, elapsed)
	}

	// The headers carry this shim's protocol version with the hints.
	r, err := send(socket, cniRoute, body, b.remaining, hintHeaders(wire, conf))
	if err != nil {
		var u *unreachableError
		if !errors.As(err, &u) {
			panic(err)
		}
		reason := u.reason
		if u.timeout {
			reason = "no answer within " + b.label
		}
		switch ce.command {
		case "STATUS":
			return fail(newError(codePluginNotAvailable, "stewardd is unreachable at "+socket+" ("+reason+")"))
		case "DEL":
			// stewardd drains the spool when it is back (per container, before that container's
			// next ADD), so the teardown is only postponed.
			if _, serr := spool(spoolDir, ce.containerID, body); serr != nil {
				return fail(newError(codeTryAgainLater, "stewardd is unreachable at "+socket+" ("+reason+
					") and the DEL could not be spooled to "+spoolDir+": "+serr.Error()))
			}
			return nil, 0
		}
		return fail(newError(codeTryAgainLater, "stewardd is unreachable at "+socket+" ("+reason+"); try again later"))
	}

	if skew := versionSkew(ce.command, r, socket); skew != nil {
		// A DEL must never be lost: stewardd replays the spool when it starts, i.e. once the
		// DaemonSet is rolled to the shim's release (an older daemon that served it answered 200).
		if ce.command == "DEL" && r.status != 200 {
			if _, serr := spool(spoolDir, ce.containerID, body); serr == nil {
				return nil, 0
			}
		}
		// An older stewardd carried the ADD out (its delegates allocated) before its answer showed
		// the skew: the runtime is told the ADD failed and sends no DEL after that (containerd
		// 1.6.37+, 1.7.23+, 2.x), so the shim undoes it itself before answering.
		if ce.command == "ADD" && r.status == 200 {
			skew.Msg += "; " + undoSkewedAdd(wire, conf, socket, spoolDir, ce.containerID, send, spool, in.elapsed)
		}
		return fail(skew)
	}
	if r.status == 200 {
		return r.body, 0
	}
	if e, _, _ := parseCNIError(r.body); e != nil {
		// STATUS: whatever keeps stewardd from serving (degraded, not ready, shutting down: 11;
		// its own bug: 104) means "the plugin is not available" to the runtime; a fault in the
		// request itself (its version, environment or netconf) keeps its own code.
		if ce.command == "STATUS" && (e.Code == codeTryAgainLater || e.Code == codeInternal) {
			return fail(newError(codePluginNotAvailable, "stewardd is not available: "+e.Msg))
		}
		return r.body, 1
	}
	return fail(&cniError{Code: codeInternal, Msg: "stewardd answered HTTP " + strconv.Itoa(r.status) + " without a CNI error",
		Details: firstChars(string(r.body), 200)})
}

// undoSkewedAdd sends the DEL of an ADD an older stewardd served (within the DEL's own bound, as
// the runtime would have sent it), or spools it when that DEL gets no 200; it says which.
func undoSkewedAdd(wire env, conf *netconf, socket, spoolDir, containerID string, send sender, spool spooler,
	elapsed func() time.Duration) string {
	del := env{}
	for k, v := range wire {
		del[k] = v
	}
	del["CNI_COMMAND"] = "DEL"
	body, err := requestBody(del, conf)
	if err != nil {
		return "its ADD could not be undone: " + err.Error()
	}
	b, _ := commandBound("DEL", nil, elapsed())
	if r, err := send(socket, cniRoute, body, b.remaining, hintHeaders(del, conf)); err == nil && r.status == 200 {
		return "the ADD it carried out was undone (DEL answered)"
	}
	if _, serr := spool(spoolDir, containerID, body); serr != nil {
		return "its ADD could not be undone (the DEL failed and could not be spooled: " + serr.Error() + ")"
	}
	return "the ADD it carried out is undone by a spooled DEL when stewardd next starts"
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
	e, _, _ := parseCNIError(r.body)
	if e == nil || e.Code != codeVersionSkew {
		return nil
	}
	return newError(code, e.Msg+" (this shim speaks protocol "+strconv.Itoa(protocolVersion)+"; stewardd at "+socket+
		" answered protocol "+r.protocol+")")
}
