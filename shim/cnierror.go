// The CNI error the shim prints (CNI spec, "Error": {cniVersion, code, msg, details}), the
// error stewardd answers with, and the DEL-safe rewrite of error texts.

package main

import (
	"bytes"
	"encoding/json"
	"strings"
)

// cniError is the shim's one error type: every failure leaves as one, with the spec's code.
type cniError struct {
	Code    int
	Msg     string
	Details string
}

func newError(code int, msg string) *cniError { return &cniError{Code: code, Msg: msg} }

func (e *cniError) Error() string { return e.Msg }

// encode is the error as printed, in cniVersion: details only when there are some.
func (e *cniError) encode(cniVersion string) []byte {
	return encodeJSON(struct {
		CniVersion string `json:"cniVersion"`
		Code       int    `json:"code"`
		Msg        string `json:"msg"`
		Details    string `json:"details,omitempty"`
	}{cniVersion, e.Code, e.Msg, e.Details})
}

// encodeJSON is json.Marshal without HTML escaping (stdout is read by runtimes, not browsers) and
// without the encoder's trailing newline. Bytes that are not UTF-8 become U+FFFD, as
// encoding/json writes them.
func encodeJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Strings, ints and string slices always encode.
		return []byte(`{"code":104,"msg":"steward shim: cannot encode its answer"}`)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// failureSafeText: containerd's go-cni (and others) read a DEL error whose text contains
// "not found" or "no such file or directory" as success. A failure must never carry them.
// Matched without regard to ASCII case.
func failureSafeText(s string) string {
	s = replaceFold(s, "not found", "not-found")
	return replaceFold(s, "no such file or directory", "ENOENT")
}

// replaceFold replaces every ASCII-case-insensitive occurrence of the lower-case word in s.
func replaceFold(s, word, with string) string {
	var out strings.Builder
	last := 0
	for i := 0; i+len(word) <= len(s); {
		if strings.EqualFold(s[i:i+len(word)], word) && isASCII(s[i:i+len(word)]) {
			out.WriteString(s[last:i])
			out.WriteString(with)
			i += len(word)
			last = i
			continue
		}
		i++
	}
	if last == 0 {
		return s
	}
	out.WriteString(s[last:])
	return out.String()
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// daemonError is a CNI error object as stewardd answers one: an object whose code is an integer
// and whose msg is a string; details kept when a string. Keys match exactly, as JSON.parse reads
// them (a struct would match them without regard to case). cniVersion is the object's own, ""
// when it has none that is a string. ok is false for anything else.
func daemonError(body []byte) (e *cniError, cniVersion string, ok bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil || obj == nil {
		return nil, "", false
	}
	var code int
	var msg string
	if !isJSONNumber(obj["code"]) || json.Unmarshal(obj["code"], &code) != nil ||
		!isJSONString(obj["msg"]) || json.Unmarshal(obj["msg"], &msg) != nil {
		return nil, "", false
	}
	e = &cniError{Code: code, Msg: msg}
	if isJSONString(obj["details"]) {
		_ = json.Unmarshal(obj["details"], &e.Details)
	}
	if isJSONString(obj["cniVersion"]) {
		_ = json.Unmarshal(obj["cniVersion"], &cniVersion)
	}
	return e, cniVersion, true
}

func isJSONString(raw json.RawMessage) bool { return len(raw) > 0 && raw[0] == '"' }

func isJSONNumber(raw json.RawMessage) bool {
	return len(raw) > 0 && (raw[0] == '-' || ('0' <= raw[0] && raw[0] <= '9'))
}
