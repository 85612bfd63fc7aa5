// Decoding the netconf on stdin: only its top level is read (the shim's own keys and the network
// name for the hints); the whole netconf is forwarded to stewardd, compacted but otherwise as sent.

package main

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// netconf is the top level of the netconf: each key's raw JSON value.
type netconf struct {
	raw  []byte
	keys map[string]json.RawMessage
}

// decodeNetconf reads stdin as a JSON object. A nil netconf with a nil error means stdin was empty.
func decodeNetconf(stdin []byte) (*netconf, *cniError) {
	if len(stdin) == 0 {
		return nil, nil
	}
	if tooDeep(stdin, maxJSONDepth) {
		// encoding/json stops at this depth; the TypeScript shim overflowed its stack at about
		// ten times it (test/integration/fuzz.test.ts). stewardd refuses anything over 100 anyway.
		return nil, newError(codeInvalidConfig, "netconf on stdin cannot be forwarded (nested too deeply?): it nests objects and arrays deeper than "+strconv.Itoa(maxJSONDepth)+" levels")
	}
	if !json.Valid(stdin) {
		var probe struct{}
		err := json.Unmarshal(stdin, &probe) // for the syntax error's text
		msg := "invalid JSON"
		if err != nil {
			msg = err.Error()
		}
		return nil, newError(codeDecodeFailure, "netconf on stdin is not valid JSON: "+msg)
	}
	keys, ok := topLevel(stdin)
	if !ok {
		return nil, newError(codeDecodeFailure, "netconf on stdin is not a JSON object")
	}
	return &netconf{raw: stdin, keys: keys}, nil
}

// topLevel: the members of a JSON object that is known to be valid, each value a slice of b (no
// copy: the netconf may be a mebibyte); a repeated key keeps its last value. false when b is not
// an object. Keys are matched exactly (encoding/json's struct decoding would ignore case).
func topLevel(b []byte) (map[string]json.RawMessage, bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	keys := map[string]json.RawMessage{}
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] == '"' {
		end := valueEnd(b, i)
		var key string
		if json.Unmarshal(b[i:end], &key) != nil {
			return nil, false
		}
		i = skipSpace(b, end)
		i = skipSpace(b, i+1) // the ':'
		end = valueEnd(b, i)
		keys[key] = b[i:end]
		i = skipSpace(b, end)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return keys, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// valueEnd: where the valid JSON value starting at b[i] ends.
func valueEnd(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
			if depth < 0 {
				return i
			}
		case ',', ' ', '\t', '\n', '\r', ':':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// tooDeep tells whether JSON text nests objects and arrays deeper than max (a scan that skips
// strings; it does not validate).
func tooDeep(b []byte, max int) bool {
	depth := 0
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
			if depth > max {
				return true
			}
		case ']', '}':
			depth--
		}
	}
	return false
}

// present: the key is there. null is a value, and not a string: the shim's keys refuse it as
// stewardd's schema does (daemon/src/engine/netconf.ts), so both sides decide it once.
func (n *netconf) present(key string) bool {
	_, ok := n.keys[key]
	return ok
}

// str is the key's value when it is a JSON string.
func (n *netconf) str(key string) (string, bool) {
	raw := n.keys[key]
	if !isJSONString(raw) {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// cniVersion is the version errors are written in: the netconf's when it has a version's shape
// (versionShaped), else the newest (stewardd decides the same: daemon/src/routes/http-status.ts).
func (n *netconf) cniVersion() string {
	if n != nil {
		if v, ok := n.str("cniVersion"); ok && versionShaped(v) {
			return v
		}
	}
	return latestVersion
}

// versionShaped: three dot-separated parts of 1 to maxVersionPartDigits ASCII digits. Anything else
// is the client's text, which an error answer does not echo (a megabyte of it, a bidi override).
func versionShaped(v string) bool {
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if len(p) < 1 || len(p) > maxVersionPartDigits {
			return false
		}
		for i := 0; i < len(p); i++ {
			if p[i] < '0' || p[i] > '9' {
				return false
			}
		}
	}
	return true
}

// socketProblem: why the "socket" value cannot name stewardd's socket ("" when it can).
func socketProblem(s string, isString bool) string {
	switch {
	case !isString || s == "":
		return `"socket" must be a non-empty string`
	case !strings.HasPrefix(s, "/"): // relative to the runtime's working directory
		return `"socket" must be an absolute path`
	case strings.IndexByte(s, 0) >= 0: // the kernel would stop at the NUL: another socket
		return `"socket" must not contain a NUL character`
	case len(s) > maxSocketPathBytes:
		return `"socket" is longer than the ` + strconv.Itoa(maxSocketPathBytes) + " bytes a Unix socket path can be"
	}
	return ""
}

// spoolDirOK: absolute (a relative one would spool into the runtime's working directory, where
// stewardd never looks) and without NUL.
func spoolDirOK(s string, isString bool) bool {
	return isString && strings.HasPrefix(s, "/") && strings.IndexByte(s, 0) < 0
}

// bound is what is left of one request's time and how an expiry names it; spent: nothing was left
// (reading stdin took all of it), and remaining is then 1 ms.
type bound struct {
	remaining time.Duration
	label     string
	spent     bool
}

// commandDefault is a command's bound when the netconf sets none, and the most "timeouts" may set.
func commandDefault(command string) (time.Duration, int64) {
	switch command {
	case "ADD":
		return addBound, maxAddTimeoutMs
	case "DEL":
		return delBound, maxDelTimeoutMs
	}
	return checkBound, maxOtherTimeoutMs
}

// commandBound: what is left, elapsed after the process started, of the command's bound from the
// netconf's "timeouts" (raw may be nil: absent), at least 1 ms; its label names the whole bound.
// Checked for every command, STATUS too: a STATUS that passes a netconf every ADD refuses (7)
// would report the network ready while no pod can start.
func commandBound(command string, timeouts json.RawMessage, elapsed time.Duration) (bound, *cniError) {
	key := strings.ToLower(command)
	def, _ := commandDefault(command)
	ms := int64(def / time.Millisecond)
	if timeouts != nil {
		entries, ok := objectEntries(timeouts)
		if !ok {
			return bound{}, newError(codeInvalidConfig, `"timeouts" must be an object of milliseconds per command`)
		}
		for _, kv := range entries {
			if kv.key != "add" && kv.key != "check" && kv.key != "del" && kv.key != "gc" {
				return bound{}, newError(codeInvalidConfig, `"timeouts" has an unknown key "`+kv.key+`" (add, check, del, gc)`)
			}
			_, most := commandDefault(strings.ToUpper(kv.key))
			v, ok := integerMs(kv.value, most)
			if !ok {
				why := `"timeouts.` + kv.key + `" must be an integer from 1 to ` + strconv.FormatInt(most, 10) + " (ms)"
				switch kv.key {
				case "add":
					why += ": an ADD and the undo of a skewed one must end inside the kubelet's 4 minutes for RunPodSandbox"
				case "del":
					why += ": a DEL stewardd does not answer is spooled before the runtime's own deadline (CRI-O: 1 minute)"
				}
				return bound{}, newError(codeInvalidConfig, why)
			}
			if kv.key == key {
				ms = v
			}
		}
	}
	if command == "STATUS" {
		ms = int64(statusBound / time.Millisecond) // fixed: no "timeouts" key sets it
	}
	// What is left of it: every bound counts from the process's start, the time spent reading stdin
	// included, so a caller slow to close stdin never stretches the call past the runtime's deadline.
	full := time.Duration(ms) * time.Millisecond
	left := full - max(elapsed, 0)
	spent := left <= 0
	if left < time.Millisecond {
		left = time.Millisecond
	}
	return bound{left, "the " + command + " bound of " + strconv.FormatInt(ms, 10) + " ms", spent}, nil
}

// integerMs: a JSON number that is an integer from 1 to most.
func integerMs(raw json.RawMessage, most int64) (int64, bool) {
	if !isJSONNumber(raw) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || f != float64(int64(f)) || f < 1 || f > float64(most) {
		return 0, false
	}
	return int64(f), true
}

type entry struct {
	key   string
	value json.RawMessage
}

// objectEntries are a JSON object's members in order (a repeated key keeps its first place and
// its last value, as JavaScript's JSON.parse does); false when raw is not an object.
func objectEntries(raw json.RawMessage) ([]entry, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var out []entry
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return nil, false
		}
		replaced := false
		for i := range out {
			if out[i].key == key {
				out[i].value, replaced = v, true
			}
		}
		if !replaced {
			out = append(out, entry{key, v})
		}
	}
	return out, true
}

// hintHeaders: the admission hints (shared/src/api.ts hintHeaders) and the protocol header.
// Values are percent-encoded as encodeURIComponent does; a longer one than maxHintBytes, or a
// network name that JSON decoding had to repair (U+FFFD), is left out: hints are optional and
// stewardd judges from the body.
func hintHeaders(e env, conf *netconf) [][2]string {
	var h [][2]string
	put := func(name, v string) {
		if strings.ContainsRune(v, utf8.RuneError) {
			return
		}
		if enc := encodeURIComponent(v); len(enc) <= maxHintBytes {
			h = append(h, [2]string{name, enc})
		}
	}
	for _, p := range [...][2]string{{hintCommandHeader, "CNI_COMMAND"}, {hintContainerIDHeader, "CNI_CONTAINERID"}, {hintIfnameHeader, "CNI_IFNAME"}} {
		if v, ok := e[p[1]]; ok {
			put(p[0], v)
		}
	}
	if name, ok := conf.str("name"); ok {
		put(hintNetworkHeader, name)
	}
	return append(h, [2]string{protocolHeader, strconv.Itoa(protocolVersion)})
}

// encodeURIComponent escapes all but A-Z a-z 0-9 - _ . ! ~ * ' ( ), as UTF-8 percent-encodings.
func encodeURIComponent(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || strings.IndexByte("-_.!~*'()", c) >= 0 {
			b.WriteByte(c)
		} else {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		}
	}
	return b.String()
}

// requestBody is what stewardd reads (shared/src/api.ts CniWireRequest): the CNI_* variables
// the runtime set, and the netconf.
func requestBody(e env, conf *netconf) ([]byte, error) {
	vars := map[string]string{}
	for _, name := range cniEnvVars {
		if v, ok := e[name]; ok {
			vars[name] = v
		}
	}
	b := append([]byte(`{"env":`), encodeJSON(vars)...)
	b = append(b, `,"config":`...)
	// Compacted into the same buffer: one copy of the netconf, not two.
	out := bytes.NewBuffer(b)
	if err := json.Compact(out, conf.raw); err != nil {
		return nil, err
	}
	out.WriteByte('}')
	return out.Bytes(), nil
}
