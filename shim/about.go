// What the binary says about itself to a person who runs it by hand: `steward --version`, and a
// short about text on stderr when CNI_COMMAND is unset (as the reference plugins' skel does).

package main

import "runtime"

// version is stamped at link time (scripts/build-shims.mjs: -X main.version=<release>+<commit>).
var version = "dev"

// versionText is the answer to --version.
func versionText() string {
	return "steward " + version + " (" + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"
}

// aboutText goes to stderr when the binary is run without CNI_COMMAND.
func aboutText() string {
	return "steward " + version + ": the CNI plugin of cni-steward. A container runtime executes it with CNI_COMMAND and\n" +
		"the other CNI_* variables set and the network config on stdin; it forwards the call to stewardd over\n" +
		"its Unix socket (default " + defaultSocket + "). CNI spec versions: " + joinVersions() + ".\n" +
		"  steward --version     this build's version\n" +
		"  stewardd status       what stewardd holds (on the node, as root)\n"
}

func joinVersions() string {
	s := ""
	for i, v := range supportedVersions {
		if i > 0 {
			s += ", "
		}
		s += v
	}
	return s
}
