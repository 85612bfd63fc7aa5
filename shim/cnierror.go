// The CNI error the shim prints (CNI spec, "Error": {cniVersion, code, msg, details}), written as
// JavaScript's JSON.stringify writes it so stdout is the same whichever side produced an error,
// and the DEL-safe rewrite of error texts.

package main

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// cniError is one CNI error. Code is a float64 because a daemon's error is passed on with the
// number it carried, whatever it was.
type cniError struct {
	Code    float64
	Msg     string
	Details string
}

func newError(code int, msg string) *cniError { return &cniError{Code: float64(code), Msg: msg} }

func (e *cniError) Error() string { return e.Msg }

// encode is the error as printed: details only when there are some.
func (e *cniError) encode(cniVersion string) []byte {
	b := make([]byte, 0, 64+len(e.Msg)+len(e.Details))
	b = append(b, `{"cniVersion":`...)
	b = appendJSONString(b, cniVersion)
	b = append(b, `,"code":`...)
	b = appendJSONNumber(b, e.Code)
	b = append(b, `,"msg":`...)
	b = appendJSONString(b, e.Msg)
	if e.Details != "" {
		b = append(b, `,"details":`...)
		b = appendJSONString(b, e.Details)
	}
	return append(b, '}')
}

// appendJSONNumber writes a number as JSON.stringify does (encoding/json follows ES6 for floats).
func appendJSONNumber(b []byte, f float64) []byte {
	if f == float64(int64(f)) && f < 1e15 && f > -1e15 {
		return strconv.AppendInt(b, int64(f), 10)
	}
	out, err := json.Marshal(f)
	if err != nil { // NaN or an infinity, which no JSON input can hold
		return append(b, "null"...)
	}
	return append(b, out...)
}

// appendJSONString quotes s as JSON.stringify does: the short escapes, \u00xx for other control
// characters, everything else as is (no HTML escaping). A byte that is not UTF-8 becomes U+FFFD,
// as it would have been when Node decoded it.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"':
				b = append(b, '\\', '"')
			case c == '\\':
				b = append(b, '\\', '\\')
			case c == '\b':
				b = append(b, '\\', 'b')
			case c == '\f':
				b = append(b, '\\', 'f')
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, "\uFFFD"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// failureSafeText: containerd's go-cni (and others) read a DEL error whose text contains
// "not found" or "no such file or directory" as success. A failure must never carry them.
// Matched without regard to ASCII case, as the TypeScript side's /…/gi does.
func failureSafeText(s string) string {
	s = replaceFold(s, "not found", "not-found")
	return replaceFold(s, "no such file or directory", "ENOENT")
}

// replaceFold replaces every ASCII-case-insensitive occurrence of the lower-case word in s.
func replaceFold(s, word, with string) string {
	var out []byte
	last := 0
	for i := 0; i+len(word) <= len(s); {
		if equalFoldASCII(s[i:i+len(word)], word) {
			if out == nil {
				out = make([]byte, 0, len(s))
			}
			out = append(out, s[last:i]...)
			out = append(out, with...)
			i += len(word)
			last = i
			continue
		}
		i++
	}
	if out == nil {
		return s
	}
	return string(append(out, s[last:]...))
}

func equalFoldASCII(a, lower string) bool {
	for i := 0; i < len(a); i++ {
		c := a[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// parseCNIError reads a CNI error object (from stewardd): an object with a numeric code and a
// string msg; details kept when it is a string. Anything else is not one (nil). The object's own
// cniVersion is returned too, with whether it had one that is a string.
func parseCNIError(body []byte) (*cniError, string, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil || obj == nil {
		return nil, "", false
	}
	var code float64
	if !isJSONNumber(obj["code"]) || json.Unmarshal(obj["code"], &code) != nil {
		return nil, "", false
	}
	var msg string
	if !isJSONString(obj["msg"]) || json.Unmarshal(obj["msg"], &msg) != nil {
		return nil, "", false
	}
	e := &cniError{Code: code, Msg: msg}
	if isJSONString(obj["details"]) {
		_ = json.Unmarshal(obj["details"], &e.Details)
	}
	var v string
	hasVersion := isJSONString(obj["cniVersion"]) && json.Unmarshal(obj["cniVersion"], &v) == nil
	return e, v, hasVersion
}

func isJSONString(raw json.RawMessage) bool { return len(raw) > 0 && raw[0] == '"' }

func isJSONNumber(raw json.RawMessage) bool {
	return len(raw) > 0 && (raw[0] == '-' || ('0' <= raw[0] && raw[0] <= '9'))
}
