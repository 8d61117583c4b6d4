package gate

import "strings"

// ipObjects are iproute2's objects in the order ip(8) tries them: a word
// names the first object it is a prefix of (`ip l` is link, `ip a`
// address), as in iproute2 6.1's ip.c.
var ipObjects = []string{
	"address", "addrlabel", "maddress", "route", "rule", "neighbor", "neighbour",
	"ntable", "ntbl", "link", "l2tp", "fou", "ila", "macsec", "tunnel", "tunl",
	"tuntap", "tap", "token", "tcpmetrics", "tcp_metrics", "monitor", "xfrm",
	"mroute", "mrule", "netns", "netconf", "vrf", "sr", "nexthop", "mptcp",
	"ioam", "amt", "stats", "help",
}

// ipShowObjects are the objects whose listing (no command, show, list or
// get) only prints state.
var ipShowObjects = map[string]bool{
	"address": true, "addrlabel": true, "maddress": true, "route": true, "rule": true,
	"neighbor": true, "neighbour": true, "ntable": true, "ntbl": true, "link": true,
	"netconf": true, "nexthop": true, "tunnel": true, "tunl": true, "tuntap": true,
	"tap": true, "token": true, "tcpmetrics": true, "tcp_metrics": true, "netns": true,
	"vrf": true, "stats": true, "help": true, "mroute": true, "mrule": true,
}

// ipNeverObjects are objects a word may not even abbreviate, whatever
// order another iproute2 version tries them in: monitor never returns, and
// xfrm prints IPsec keys.
var ipNeverObjects = []string{"monitor", "xfrm"}

// ipReadCommands are the commands that only print; ipWriteCommands are
// every command of any object that changes state. iproute2 matches a
// command by prefix in an order that differs per object (`ip link s` is
// set, `ip addr s` is show), so a word passes only when it abbreviates a
// read command and no write command.
var (
	ipReadCommands  = []string{"show", "list", "lst", "get"}
	ipWriteCommands = []string{
		"add", "append", "attach", "change", "chg", "delete", "del", "detach", "exec",
		"flush", "prepend", "replace", "restore", "save", "set", "test", "update",
		"monitor", "identify", "pids", "unset", "replay",
	}
)

// ipOperands judges `ip [OPTIONS] OBJECT [COMMAND [ARGS]]`: the object
// must be one that lists state, and the command (if any) a read command.
// The arguments after the command are selectors (dev eth0, table main).
func ipOperands(operands []arg) *Decision {
	if len(operands) == 0 {
		return ptr(confirm("ip.object", "`ip` without an object"))
	}
	word := operands[0].s
	obj := ""
	for _, o := range ipObjects {
		if strings.HasPrefix(o, word) {
			obj = o
			break
		}
	}
	for _, o := range ipNeverObjects {
		if strings.HasPrefix(o, word) {
			return ptr(confirm("ip.object", "`ip %s` can mean `ip %s`, which is not read-only", word, o))
		}
	}
	if obj == "" || word == "" || !ipShowObjects[obj] {
		return ptr(confirm("ip.object", "`ip %s` is not a read-only iproute2 object", word))
	}
	if len(operands) < 2 {
		return nil
	}
	cmd := operands[1].s
	if cmd == "" || !prefixOfAny(cmd, ipReadCommands) {
		return ptr(confirm("ip.command", "`ip %s %s` is not a read-only command (only show, list, get)", word, cmd))
	}
	if prefixOfAny(cmd, ipWriteCommands) {
		return ptr(confirm("ip.command", "`ip %s %s` can abbreviate a command that changes the network", word, cmd))
	}
	return nil
}

// prefixOfAny reports whether w is a prefix of one of words.
func prefixOfAny(w string, words []string) bool {
	for _, s := range words {
		if strings.HasPrefix(s, w) {
			return true
		}
	}
	return false
}
