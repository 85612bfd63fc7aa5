// The contract's test vectors (shared/vectors/shim.json), each a named sub-test: the call goes
// through call() (stdin on a pipe, the real HTTP client and spool writer) against a Unix socket
// server in a temp dir that answers as the vector says. test/integration/shim-vectors.test.ts runs
// the same vectors against the built binary.

package main

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

type vectorFile struct {
	Netconf map[string]interface{} `json:"netconf"`
	Vectors []vector               `json:"vectors"`
}

type vector struct {
	Name      string                     `json:"name"`
	Env       map[string]json.RawMessage `json:"env"`
	Stdin     json.RawMessage            `json:"stdin"`
	Reply     json.RawMessage            `json:"reply"`
	Spool     string                     `json:"spool"`
	ElapsedMs int                        `json:"elapsedMs"`
	GoOnly    string                     `json:"goOnly"`
	Want      struct {
		ExitCode   int             `json:"exitCode"`
		Stdout     *string         `json:"stdout"`
		Code       *float64        `json:"code"`
		CniVersion *string         `json:"cniVersion"`
		Msg        string          `json:"msg"`
		MsgNot     string          `json:"msgNot"`
		Sent       json.RawMessage `json:"sent"`
		Spooled    json.RawMessage `json:"spooled"`
		MaxMs      int             `json:"maxMs"`
	} `json:"want"`
}

type httpReply struct {
	Status   int     `json:"status"`
	Body     string  `json:"body"`
	Protocol *string `json:"protocol"`
	Raw      *string `json:"raw"`
}

func loadVectors(t testing.TB) vectorFile {
	data, err := os.ReadFile(filepath.Join("..", "shared", "vectors", "shim.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f vectorFile
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// genString resolves a vector string: a JSON string, {"$repeat", "times", "prefix"} or {"$hex"}.
func genString(t testing.TB, raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var g struct {
		Repeat *string `json:"$repeat"`
		Times  int     `json:"times"`
		Prefix string  `json:"prefix"`
		Hex    *string `json:"$hex"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatalf("not a vector string: %s", raw)
	}
	if g.Hex != nil {
		b, err := hex.DecodeString(*g.Hex)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if g.Repeat == nil {
		t.Fatalf("not a vector string: %s", raw)
	}
	return g.Prefix + strings.Repeat(*g.Repeat, g.Times)
}

func isGen(raw json.RawMessage) bool {
	return bytes.Contains(raw, []byte(`"$repeat"`)) || bytes.Contains(raw, []byte(`"$hex"`))
}

func encodeTestJSON(t testing.TB, v interface{}) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// stdinOf builds a vector's stdin; open tells the writer to leave it open.
func stdinOf(t testing.TB, f vectorFile, raw json.RawMessage, subst *strings.Replacer) (data []byte, open bool) {
	if len(raw) == 0 {
		return nil, false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []byte(subst.Replace(s)), false
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	if _, ok := obj["$netconf"]; ok {
		conf := map[string]interface{}{}
		for k, v := range f.Netconf {
			conf[k] = v
		}
		for k, v := range obj {
			if k == "$netconf" {
				continue
			}
			if isGen(v) {
				conf[k] = genString(t, v)
				continue
			}
			var x interface{}
			if err := json.Unmarshal(v, &x); err != nil {
				t.Fatal(err)
			}
			conf[k] = x
		}
		return []byte(subst.Replace(string(encodeTestJSON(t, conf)))), false
	}
	if parts, ok := obj["$parts"]; ok {
		var list []json.RawMessage
		if err := json.Unmarshal(parts, &list); err != nil {
			t.Fatal(err)
		}
		var b []byte
		for _, p := range list {
			if bytes.Contains(p, []byte(`"$netconf"`)) {
				part, _ := stdinOf(t, f, p, subst)
				b = append(b, part...)
			} else {
				b = append(b, subst.Replace(genString(t, p))...)
			}
		}
		if padRaw, ok := obj["$pad"]; ok {
			pad, _ := strconv.Atoi(string(padRaw))
			for len(b) < pad {
				b = append(b, ' ')
			}
		}
		_, open := obj["$open"]
		return b, open
	}
	var x interface{}
	if err := json.Unmarshal(raw, &x); err != nil {
		t.Fatal(err)
	}
	return []byte(subst.Replace(string(encodeTestJSON(t, x)))), false
}

// replies: a vector's reply as a list, the i-th for the i-th connection (the last repeats). A
// single reply is a list of one; "unreachable" and "none" are only valid alone.
func replies(t testing.TB, reply json.RawMessage) []json.RawMessage {
	var list []json.RawMessage
	if len(reply) == 0 || reply[0] != '[' {
		return []json.RawMessage{reply}
	}
	if err := json.Unmarshal(reply, &list); err != nil {
		t.Fatal(err)
	}
	if len(list) == 0 {
		t.Fatalf("an empty reply list")
	}
	for _, r := range list {
		if k := replyKind(r); k == "unreachable" || k == "none" || len(r) == 0 {
			t.Fatalf("reply %q is only valid as a single reply, not in a list", r)
		}
	}
	return list
}

// recorded is one request the fake stewardd read.
type recorded struct {
	method, path string
	headers      map[string]string
	body         []byte
}

// fakeDaemon serves one vector's replies on a Unix socket, the i-th to the i-th connection.
type fakeDaemon struct {
	mu      sync.Mutex
	reqs    []recorded
	held    []net.Conn
	ln      net.Listener
	replies []json.RawMessage
}

func startDaemon(t *testing.T, socket string, reply json.RawMessage) *fakeDaemon {
	d := &fakeDaemon{replies: replies(t, reply)}
	if replyKind(reply) == "unreachable" {
		// A regular file where the socket should be: connect(2) answers ECONNREFUSED, as for a
		// stale socket nobody listens on.
		if err := os.WriteFile(socket, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		return d
	}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	d.ln = ln
	go d.serve()
	t.Cleanup(func() {
		ln.Close()
		d.mu.Lock()
		for _, c := range d.held {
			c.Close()
		}
		d.mu.Unlock()
	})
	return d
}

// replyKind: "unreachable", "frozen", "none" (no request expected; answered 200 if one comes), or
// "" for an answer given in the vector (or a list of replies).
func replyKind(reply json.RawMessage) string {
	var kind string
	if len(reply) == 0 {
		return "none"
	}
	_ = json.Unmarshal(reply, &kind)
	return kind
}

func (d *fakeDaemon) serve() {
	for i := 0; ; i++ {
		c, err := d.ln.Accept()
		if err != nil {
			return
		}
		r := d.replies[len(d.replies)-1]
		if i < len(d.replies) {
			r = d.replies[i]
		}
		go d.handle(c, r)
	}
}

// handle reads one request and answers it as r says; a frozen stewardd reads it and never answers.
func (d *fakeDaemon) handle(c net.Conn, reply json.RawMessage) {
	kind := replyKind(reply)
	if kind == "frozen" {
		d.mu.Lock()
		d.held = append(d.held, c)
		d.mu.Unlock()
	} else {
		defer c.Close()
	}
	rd := bufio.NewReader(c)
	req := recorded{headers: map[string]string{}}
	line, err := rd.ReadString('\n')
	if err != nil {
		return
	}
	if f := strings.Fields(line); len(f) >= 2 {
		req.method, req.path = f[0], f[1]
	}
	for {
		h, err := rd.ReadString('\n')
		if err != nil {
			return
		}
		h = strings.TrimRight(h, "\r\n")
		if h == "" {
			break
		}
		if i := strings.IndexByte(h, ':'); i > 0 {
			req.headers[strings.ToLower(h[:i])] = strings.TrimSpace(h[i+1:])
		}
	}
	n, _ := strconv.Atoi(req.headers["content-length"])
	req.body = make([]byte, n)
	if _, err := io.ReadFull(rd, req.body); err != nil {
		return
	}
	d.mu.Lock()
	d.reqs = append(d.reqs, req)
	d.mu.Unlock()
	var r httpReply
	switch {
	case kind == "frozen":
		return
	case kind == "none":
		r = httpReply{Status: 200, Body: `{"cniVersion":"1.0.0"}`}
		two := "2"
		r.Protocol = &two
	default:
		if err := json.Unmarshal(reply, &r); err != nil {
			return
		}
	}
	if r.Raw != nil {
		_, _ = c.Write([]byte(*r.Raw))
		return
	}
	head := "HTTP/1.1 " + strconv.Itoa(r.Status) + " X\r\ncontent-type: application/json\r\ncontent-length: " + strconv.Itoa(len(r.Body)) + "\r\n"
	if r.Protocol != nil {
		head += "x-steward-protocol: " + *r.Protocol + "\r\n"
	}
	_, _ = c.Write([]byte(head + "connection: close\r\n\r\n" + r.Body))
}

func (d *fakeDaemon) requests() []recorded {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]recorded(nil), d.reqs...)
}

// jsonEqual compares JSON texts by value.
func jsonEqual(t testing.TB, got []byte, want interface{}) bool {
	var g interface{}
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("not JSON: %q", got)
		return false
	}
	return reflect.DeepEqual(g, want)
}

func TestVectors(t *testing.T) {
	f := loadVectors(t)
	spoolName := regexp.MustCompile(loadSpoolDescription(t).NamePattern)
	for _, v := range f.Vectors {
		v := v
		t.Run(v.Name, func(t *testing.T) {
			t.Parallel()
			// Short: a Unix socket's path is at most 107 bytes.
			dir, err := os.MkdirTemp("", "stv")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			subst := strings.NewReplacer("@SOCKET@", filepath.Join(dir, "s.sock"), "@SPOOL@", filepath.Join(dir, "spool"))
			substRe := strings.NewReplacer("@SOCKET@", regexp.QuoteMeta(filepath.Join(dir, "s.sock")), "@SPOOL@", regexp.QuoteMeta(filepath.Join(dir, "spool")))
			switch v.Spool {
			case "":
			case "fails":
				// A regular file where the spool dir should be: nothing can be written under it.
				if err := os.WriteFile(filepath.Join(dir, "spool"), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			default:
				t.Fatalf("spool %q: only \"fails\" is known", v.Spool)
			}
			daemon := startDaemon(t, filepath.Join(dir, "s.sock"), v.Reply)
			e := env{}
			for k, raw := range v.Env {
				e[k] = subst.Replace(genString(t, raw))
			}
			stdin, open := stdinOf(t, f, v.Stdin, subst)
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			go func() {
				_, _ = w.Write(stdin)
				if !open {
					w.Close()
				}
			}()
			if open {
				defer w.Close()
			}
			start := time.Now()
			elapsed := func() time.Duration { return time.Since(start) + time.Duration(v.ElapsedMs)*time.Millisecond }
			out, code := call(e, int(r.Fd()), elapsed, postUnix, spoolRequest)
			took := time.Since(start)
			checkAnswer(t, v, out, code, substRe, subst)
			if v.Want.MaxMs > 0 && took > time.Duration(v.Want.MaxMs)*time.Millisecond {
				t.Errorf("took %v, more than %d ms", took, v.Want.MaxMs)
			}
			checkSent(t, v, daemon.requests(), subst)
			checkSpooled(t, v, filepath.Join(dir, "spool"), spoolName, subst)
		})
	}
}

func checkAnswer(t *testing.T, v vector, out []byte, code int, substRe, subst *strings.Replacer) {
	t.Helper()
	if code != v.Want.ExitCode {
		t.Errorf("exit code %d, want %d; stdout %s", code, v.Want.ExitCode, out)
	}
	if v.Want.Stdout != nil && string(out) != subst.Replace(*v.Want.Stdout) {
		t.Errorf("stdout %q, want %q", out, subst.Replace(*v.Want.Stdout))
	}
	if v.Want.Code == nil && v.Want.Msg == "" && v.Want.CniVersion == nil && v.Want.MsgNot == "" {
		return
	}
	var got struct {
		CniVersion *string  `json:"cniVersion"`
		Code       *float64 `json:"code"`
		Msg        string   `json:"msg"`
	}
	if err := json.Unmarshal(out, &got); err != nil || got.Code == nil || got.CniVersion == nil {
		t.Fatalf("not a CNI error: %s", out)
	}
	if v.Want.Code != nil && *got.Code != *v.Want.Code {
		t.Errorf("code %v, want %v: %s", *got.Code, *v.Want.Code, got.Msg)
	}
	if v.Want.CniVersion != nil && *got.CniVersion != *v.Want.CniVersion {
		t.Errorf("cniVersion %s, want %s", *got.CniVersion, *v.Want.CniVersion)
	}
	if v.Want.Msg != "" && !regexp.MustCompile(substRe.Replace(v.Want.Msg)).MatchString(got.Msg) {
		t.Errorf("msg %q does not match %q", got.Msg, substRe.Replace(v.Want.Msg))
	}
	if v.Want.MsgNot != "" && regexp.MustCompile(v.Want.MsgNot).Match(out) {
		t.Errorf("stdout %s matches %q", out, v.Want.MsgNot)
	}
}

func checkSent(t *testing.T, v vector, reqs []recorded, subst *strings.Replacer) {
	t.Helper()
	kind := replyKind(v.Reply)
	if len(v.Want.Sent) == 0 {
		return
	}
	var sentBool bool
	if json.Unmarshal(v.Want.Sent, &sentBool) == nil {
		if kind == "frozen" || kind == "unreachable" {
			return
		}
		if sentBool != (len(reqs) > 0) {
			t.Errorf("%d requests reached stewardd, want sent=%v", len(reqs), sentBool)
		}
		return
	}
	// One request (an object) or exactly that many (a list), each checked alike.
	var wants []sentRequest
	text := []byte(subst.Replace(string(v.Want.Sent)))
	if text[0] != '[' {
		wants = make([]sentRequest, 1)
		if err := json.Unmarshal(text, &wants[0]); err != nil {
			t.Fatal(err)
		}
	} else if err := json.Unmarshal(text, &wants); err != nil {
		t.Fatal(err)
	}
	if len(reqs) != len(wants) {
		t.Fatalf("%d requests reached stewardd, want %d", len(reqs), len(wants))
	}
	for i, want := range wants {
		checkRequest(t, i, reqs[i], want)
	}
}

// sentRequest is what one request must carry (want.sent, or an element of it).
type sentRequest struct {
	Method  string             `json:"method"`
	Path    string             `json:"path"`
	Headers map[string]*string `json:"headers"`
	Body    json.RawMessage    `json:"body"`
}

func checkRequest(t *testing.T, i int, req recorded, want sentRequest) {
	t.Helper()
	if want.Method != "" && req.method != want.Method {
		t.Errorf("request %d: method %s, want %s", i, req.method, want.Method)
	}
	if want.Path != "" && req.path != want.Path {
		t.Errorf("request %d: path %s, want %s", i, req.path, want.Path)
	}
	for k, wv := range want.Headers {
		gv, ok := req.headers[k]
		if wv == nil && ok {
			t.Errorf("request %d: header %s: %q, want none", i, k, gv)
		} else if wv != nil && gv != *wv {
			t.Errorf("request %d: header %s: %q, want %q", i, k, gv, *wv)
		}
	}
	if len(want.Body) > 0 {
		var wb interface{}
		_ = json.Unmarshal(want.Body, &wb)
		if !jsonEqual(t, req.body, wb) {
			t.Errorf("request %d: body %s, want %s", i, req.body, want.Body)
		}
	}
}

func checkSpooled(t *testing.T, v vector, dir string, name *regexp.Regexp, subst *strings.Replacer) {
	t.Helper()
	if v.Spool == "fails" {
		if st, err := os.Lstat(dir); err != nil || !st.Mode().IsRegular() {
			t.Errorf("the spool dir that cannot be made was replaced: %v %v", st, err)
		}
		var b bool
		if len(v.Want.Spooled) > 0 && (json.Unmarshal(v.Want.Spooled, &b) != nil || b) {
			t.Fatalf("want.spooled %s with spool \"fails\"", v.Want.Spooled)
		}
	}
	entries, _ := os.ReadDir(dir)
	var files []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("a temp file was left: %s", e.Name())
		}
		files = append(files, e.Name())
	}
	if len(v.Want.Spooled) == 0 {
		return
	}
	var b bool
	if json.Unmarshal(v.Want.Spooled, &b) == nil {
		if b != (len(files) > 0) {
			t.Errorf("spooled %v, want %v", files, b)
		}
		return
	}
	var want struct {
		ContainerID string          `json:"containerId"`
		Body        json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal([]byte(subst.Replace(string(v.Want.Spooled))), &want); err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 {
		t.Fatalf("spooled %v, want one file", files)
	}
	m := name.FindStringSubmatch(files[0])
	if m == nil || m[2] != want.ContainerID {
		t.Errorf("spool file %s does not match %s for %s", files[0], name, want.ContainerID)
	}
	st, err := os.Stat(filepath.Join(dir, files[0]))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("spool file mode %v (%v), want 0600", st.Mode(), err)
	}
	if len(want.Body) > 0 {
		got, _ := os.ReadFile(filepath.Join(dir, files[0]))
		var wb interface{}
		_ = json.Unmarshal(want.Body, &wb)
		if !jsonEqual(t, got, wb) {
			t.Errorf("spooled %s, want %s", got, want.Body)
		}
	}
}

type spoolDescription struct {
	NamePattern string `json:"namePattern"`
	TempPattern string `json:"tempPattern"`
	Examples    []struct {
		Ms          int64  `json:"ms"`
		ContainerID string `json:"containerId"`
		Random      string `json:"random"`
		Name        string `json:"name"`
	} `json:"examples"`
}

func loadSpoolDescription(t testing.TB) spoolDescription {
	data, err := os.ReadFile(filepath.Join("..", "shared", "vectors", "spool.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d spoolDescription
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestSpoolNamesAreTheContractsNames(t *testing.T) {
	d := loadSpoolDescription(t)
	name := regexp.MustCompile(d.NamePattern)
	temp := regexp.MustCompile(d.TempPattern)
	for _, ex := range d.Examples {
		var r [4]byte
		b, _ := hex.DecodeString(ex.Random)
		copy(r[:], b)
		stem := spoolName(time.Unix(0, ex.Ms*int64(time.Millisecond)), ex.ContainerID, r)
		if stem+".json" != ex.Name {
			t.Errorf("name %s.json, want %s", stem, ex.Name)
		}
		if !name.MatchString(stem+".json") || !temp.MatchString("."+stem+".tmp") || name.MatchString("."+stem+".tmp") {
			t.Errorf("%s does not follow the patterns", stem)
		}
	}
}
