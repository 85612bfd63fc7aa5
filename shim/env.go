// Reading the CNI_* environment of one call (CNI spec, "Parameters"), as shared/src/cni/env.ts and
// validate.ts do for stewardd: every problem is reported in one error (code 4), so an operator
// fixes them all at once rather than one per retry.

package main

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// env is the process environment as the shim sees it: a variable set to "" is present.
type env map[string]string

func (e env) get(name string) string { return e[name] }

// cniEnv is a validated environment.
type cniEnv struct {
	command     string
	containerID string
}

// required: the variables each command needs; DEL may have an empty netns.
func required(command string) []string {
	switch command {
	case "ADD", "CHECK":
		return []string{"CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"}
	case "DEL":
		return []string{"CNI_CONTAINERID", "CNI_IFNAME", "CNI_PATH"}
	case "GC", "STATUS":
		return []string{"CNI_PATH"}
	}
	return nil
}

func parseCNIEnv(e env) (cniEnv, *cniError) {
	command := e.get("CNI_COMMAND")
	expected := "expected one of " + strings.Join(cniCommands[:], ", ")
	if command == "" {
		return cniEnv{}, &cniError{Code: codeInvalidEnv, Msg: "CNI_COMMAND is not set", Details: expected}
	}
	known := false
	for _, c := range cniCommands {
		known = known || c == command
	}
	if !known {
		return cniEnv{}, &cniError{Code: codeInvalidEnv, Msg: `CNI_COMMAND "` + command + `" is not a CNI command`, Details: expected}
	}
	var problems []string
	for _, name := range required(command) {
		if e.get(name) == "" {
			problems = append(problems, name+" is not set")
		}
	}
	for _, name := range [...]string{"CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_ARGS", "CNI_PATH"} {
		v := e.get(name)
		if hasControl(v) {
			problems = append(problems, name+" contains control characters")
		}
		// Not UTF-8 (or U+FFFD, which is what Node made of such bytes): the value would not be
		// what the runtime sent once stewardd decodes it (two ifnames would become one key).
		if !utf8.ValidString(v) || strings.ContainsRune(v, utf8.RuneError) {
			problems = append(problems, name+" is not valid UTF-8")
		}
	}
	containerID := e.get("CNI_CONTAINERID")
	if containerID != "" {
		if why := checkContainerID(containerID); why != "" {
			problems = append(problems, "CNI_CONTAINERID "+why)
		}
	}
	if ifname := e.get("CNI_IFNAME"); ifname != "" {
		if why := checkIfName(ifname); why != "" {
			problems = append(problems, "CNI_IFNAME "+why)
		}
	}
	// DEL stays lenient (a DEL that cannot succeed pins the sandbox); teardown uses the ADD's args.
	if command == "ADD" || command == "CHECK" {
		if why := cniArgsProblem(e.get("CNI_ARGS")); why != "" {
			problems = append(problems, why)
		}
		// The kernel reads "%" in a new link's name as a template (eth%d becomes eth0), which the
		// DEL of eth%d never finds. DEL of such a name is still sent.
		if strings.Contains(e.get("CNI_IFNAME"), "%") {
			problems = append(problems, ifnameTemplate)
		}
	}
	if len(problems) > 0 {
		return cniEnv{}, newError(codeInvalidEnv, "invalid CNI environment: "+strings.Join(problems, "; "))
	}
	return cniEnv{command: command, containerID: containerID}, nil
}

// hasControl: s holds a control character as stewardd counts them (the contract,
// shared/src/cni/validate.ts CONTROL_RE): C0, DEL and C1 (U+0080 to U+009F). Bytes that are not
// UTF-8 are not characters here; the UTF-8 check refuses them.
func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return true
		}
	}
	return false
}

// checkContainerID: container ids and network names share the spec's rule, which admits ASCII
// only (so a length is in bytes and characters alike); at most 1024 long.
func checkContainerID(id string) string {
	if !isASCII(id) {
		return checkName(id)
	}
	if len(id) > maxContainerIDLength {
		return "is " + strconv.Itoa(len(id)) + " characters long; at most " + strconv.Itoa(maxContainerIDLength) + " are accepted (runtimes use 64)"
	}
	return checkName(id)
}

func checkName(name string) string {
	if name == "" {
		return "is empty"
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
		if !alnum && (i == 0 || (c != '_' && c != '.' && c != '-')) {
			return `must start with an alphanumeric character and contain only alphanumerics, "_", "." and "-"`
		}
	}
	return ""
}

// checkIfName: Linux interface names are 1..15 bytes, not "." or "..", no "/", ":" or whitespace.
func checkIfName(name string) string {
	switch {
	case name == "":
		return "is empty"
	case len(name) > 15:
		return "is longer than 15 bytes"
	case name == "." || name == "..":
		return `must not be "." or ".."`
	}
	for _, r := range name {
		if r == '/' || r == ':' || isSpace(r) {
			return `must not contain "/", ":" or whitespace`
		}
	}
	if hasControl(name) {
		return "must not contain control characters"
	}
	return ""
}

// isSpace is white space as stewardd's check reads it (the contract, shared/src/cni/validate.ts):
// Unicode's White_Space (unicode.IsSpace) and the byte order mark, less NEL (U+0085), which
// stewardd does not count as white space (it is a C1 control character, refused as one: hasControl).
func isSpace(r rune) bool {
	return r == 0xfeff || (r != 0x85 && unicode.IsSpace(r))
}

// cniArgsProblem: why CNI_ARGS would be refused by the reference plugins' parser (cni pkg/types
// LoadArgs splits on ";" and wants every piece to split on "=" into exactly two parts), so ADD is
// refused up front instead of leaving a rollback that can never finish.
func cniArgsProblem(args string) string {
	if args == "" {
		return ""
	}
	for _, pair := range strings.Split(args, ";") {
		if strings.Count(pair, "=") != 1 {
			return `CNI_ARGS pair "` + clip(pair, 64) + `" is malformed: want KEY=VALUE pairs separated by ";" (no empty pair, no "=" in a value)`
		}
	}
	return ""
}

// clip cuts text to at most max bytes (on a character boundary), saying how much was cut.
func clip(text string, max int) string {
	if len(text) <= max {
		return text
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut] + "… [" + strconv.Itoa(len(text)-cut) + " more bytes cut]"
}
