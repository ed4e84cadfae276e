package minitest

import (
	"fmt"
	"strings"
)

// Stacks condenses a Go goroutine dump (what SIGQUIT prints) to what the
// report of a stuck process needs: one line per distinct place where
// goroutines wait, with how many wait there, in the order of the dump. A
// goroutine's place is its state, its innermost frame in minictl's own
// code (its packages, and the main package of the binary), and what that
// frame called (a library's function, or the
// runtime's); goroutines that never enter minictl's code are only
// counted.
func Stacks(dump string) string {
	const module = "github.com/minictl/minictl/"
	if !strings.HasPrefix(dump, "goroutine ") {
		_, rest, found := strings.Cut(dump, "\ngoroutine ")
		if !found {
			return ""
		}
		dump = "goroutine " + rest
	}
	type place struct{ state, frame, callee string }
	var order []place
	count := map[place]int{}
	others := 0
	for g := range strings.SplitSeq(dump, "\n\ngoroutine ") {
		lines := strings.Split(g, "\n")
		p := place{state: waitState(lines[0])}
		for i := 1; i+1 < len(lines); i += 2 {
			fn, at := funcName(lines[i]), fileLine(lines[i+1])
			if strings.HasPrefix(fn, module) || strings.HasPrefix(fn, "main.") {
				p.frame = strings.TrimPrefix(fn, module) + " " + at
				break
			}
			p.callee = fn
		}
		if p.frame == "" {
			others++
			continue
		}
		if count[p] == 0 {
			order = append(order, p)
		}
		count[p]++
	}
	var b strings.Builder
	for _, p := range order {
		fmt.Fprintf(&b, "%4d [%s] %s", count[p], p.state, p.frame)
		if p.callee != "" {
			fmt.Fprintf(&b, " → %s", p.callee)
		}
		b.WriteByte('\n')
	}
	if others > 0 {
		fmt.Fprintf(&b, "%4d more never entered minictl's code (the runtime's, the libraries')\n", others)
	}
	return b.String()
}

// waitState is what a goroutine header says it waits on: "select" of
// "goroutine 7 gp=0xc0 m=nil [select, 2 minutes]:".
func waitState(header string) string {
	open, end := strings.Index(header, "["), strings.LastIndex(header, "]")
	if open < 0 || end < open {
		return ""
	}
	state, _, _ := strings.Cut(header[open+1:end], ",")
	return state
}

// funcName is a frame's function without its arguments:
// "net/http.(*Server).Shutdown" of "net/http.(*Server).Shutdown(0xc0, ...)".
func funcName(frame string) string {
	frame = strings.TrimSpace(frame)
	if i := strings.LastIndex(frame, "("); i > 0 && strings.HasSuffix(frame, ")") {
		return frame[:i]
	}
	return frame
}

// fileLine is a frame's "server.go:612", without the directory, the
// offset and the frame pointers.
func fileLine(at string) string {
	at, _, _ = strings.Cut(strings.TrimSpace(at), " ")
	return at[strings.LastIndex(at, "/")+1:]
}
