// The runtime's trace context (W3C Trace Context and Baggage), which libcni passes to every plugin
// it executes as TRACEPARENT, TRACESTATE and BAGGAGE (containernetworking/cni PR #1173): forwarded
// to stewardd as the standard request headers, so its spans continue the runtime's trace. A value
// that is malformed or longer than a hint may be is left out: tracing never fails a CNI call.

package main

// traceVars maps each variable to the header that carries it.
var traceVars = [...][2]string{{"TRACEPARENT", "traceparent"}, {"TRACESTATE", "tracestate"}, {"BAGGAGE", "baggage"}}

// traceHeaders: the trace context of the runtime's environment as request headers.
func traceHeaders(e env) [][2]string {
	var h [][2]string
	for _, tv := range traceVars {
		v, ok := e[tv[0]]
		if !ok || v == "" || len(v) > maxHintBytes || !headerSafe(v) {
			continue
		}
		if tv[1] == "traceparent" && !validTraceparent(v) {
			continue
		}
		h = append(h, [2]string{tv[1], v})
	}
	return h
}

// headerSafe: printable ASCII only (tracestate and baggage are lists of such), so nothing can
// end the header or start another.
func headerSafe(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

// validTraceparent: "version-traceid-parentid-flags" in lower-case hex (W3C Trace Context,
// "traceparent Header Field Values"): 2-32-16-2 digits, neither id all zeros, version ff invalid.
// A later version may append fields after the flags ("-…"); version 00 may not.
func validTraceparent(v string) bool {
	if len(v) < 55 || (len(v) > 55 && (v[:2] == "00" || v[55] != '-')) {
		return false
	}
	for i := 0; i < 55; i++ {
		switch i {
		case 2, 35, 52:
			if v[i] != '-' {
				return false
			}
		default:
			if !isLowerHex(v[i]) {
				return false
			}
		}
	}
	return v[:2] != "ff" && !allZero(v[3:35]) && !allZero(v[36:52])
}

func isLowerHex(c byte) bool { return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') }

func allZero(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}
