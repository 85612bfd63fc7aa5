// The shim's half of the contract with stewardd: the constants of shared/src/api.ts,
// shared/src/cni/errors.ts and shared/src/cni/versions.ts that the shim needs, in Go. The test
// vectors (shared/vectors/) pin both sides to the same values.

package main

import "time"

const (
	defaultSocket   = "/run/steward/stewardd.sock"
	defaultSpoolDir = "/var/lib/steward/spool"
	cniRoute        = "/v1/cni"

	// maxNetconfBytes bounds the netconf read from stdin.
	maxNetconfBytes = 1024 * 1024
	// maxRequestBytes is the largest request body (and spool file) stewardd reads: a bigger one
	// is refused up front (code 7) rather than sent or spooled where it could never be served.
	maxRequestBytes = maxNetconfBytes + 64*1024
	// maxSocketPathBytes is sun_path's 108 bytes less its terminating NUL.
	maxSocketPathBytes = 107
	// maxContainerIDLength: the CNI spec sets no bound; runtimes use 64 (issue 19).
	maxContainerIDLength = 1024
	// maxHintBytes: a longer (percent-encoded) hint is left out; hints are optional.
	maxHintBytes = 1024
	// maxJSONDepth is encoding/json's own nesting limit: deeper input cannot be decoded here.
	maxJSONDepth = 10000
	// maxAnswerBytes bounds what is read of stewardd's answer (its results are a few KiB).
	maxAnswerBytes = 4 * 1024 * 1024

	// The shim's bounds, each inside the runtime's own deadline for the call (docs/architecture.md,
	// "Deadlines"). ADD: the kubelet gives RunPodSandbox 4 minutes; an ADD's bound plus the undo
	// of a skewed ADD (a DEL, within delBound) stays under it even at maxAddTimeoutMs.
	addBound = 120 * time.Second
	// DEL: CRI-O gives a DEL 1 minute and the kubelet StopPodSandbox 2: the shim spools the DEL
	// and answers success well before either, so a frozen stewardd never fails a pod's deletion.
	delBound = 30 * time.Second
	// CHECK and GC: no runtime deadline is tighter than the default.
	checkBound = 120 * time.Second
	// statusBound: STATUS answers within this long of the shim's start (containerd 2.x runs it
	// every 5 s under a lock with no deadline of its own). Not overridable in the netconf.
	statusBound = 750 * time.Millisecond

	// restartRecordSuffix names the restart record beside the socket (<socket>.restarting), and
	// maxRestartGrace the longest any record may cover (stewardd's --restart-grace is at most this).
	restartRecordSuffix = ".restarting"
	// statusNotReadySuffix names the note of the last STATUS the shim answered not ready on its own.
	statusNotReadySuffix = ".status-not-ready"
	maxRestartGrace      = 120 * time.Second
	bootIDFile           = "/proc/sys/kernel/random/boot_id"
	// restartPoll: how often an ADD, CHECK or GC looks for the successor during a restart.
	restartPoll = 100 * time.Millisecond

	// The netconf's "timeouts" (ms) may set each bound from 1 ms up to these.
	maxAddTimeoutMs   = 200000
	maxDelTimeoutMs   = 50000
	maxOtherTimeoutMs = 3600000

	protocolHeader      = "x-steward-protocol"
	protocolVersion     = 2
	unversionedProtocol = 1
	skewAdvice          = "the shim installed on this node and stewardd come from different releases: roll the stewardd DaemonSet so its install step replaces the shim (or reinstall the shim with `stewardd install`)"

	latestVersion = "1.1.0"
)

// CNI error codes (CNI spec, "Error"), and the project's own (docs/errors.md).
const (
	codeInvalidEnv         = 4
	codeDecodeFailure      = 6
	codeInvalidConfig      = 7
	codeTryAgainLater      = 11
	codePluginNotAvailable = 50
	codeInternal           = 104
	codeVersionSkew        = 108
)

var supportedVersions = [...]string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}

// cniEnvVars are the variables forwarded to stewardd, in the order the request names them.
var cniEnvVars = [...]string{"CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_ARGS", "CNI_PATH"}

var cniCommands = [...]string{"ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION"}
