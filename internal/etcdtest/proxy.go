package etcdtest

import (
	"net"
	"sync"
)

// proxy forwards TCP connections on a loopback port to a target that can
// change, pause, or be cut off.
//
// Invariants, under mu: flowing is closed iff the proxy is not paused; cut
// is closed and replaced each time the connections are cut, so a
// connection holds the cut of its time; a connection is in conns from its
// accept (or dial) until it is closed.
type proxy struct {
	ln net.Listener
	wg sync.WaitGroup // every connection's goroutines

	mu      sync.Mutex
	target  string // "" while there is nothing to reach: connections close at once
	flowing chan struct{}
	cut     chan struct{}
	conns   map[net.Conn]struct{}
}

func newProxy() (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, flowing: make(chan struct{}), cut: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(p.flowing)
	p.wg.Go(p.serve)
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.handle(c) })
	}
}

// handle forwards one client connection. While the proxy is paused it is
// accepted and held, as the kernel holds connections to a stopped process.
func (p *proxy) handle(c net.Conn) {
	cut, ok := p.track(c)
	if !ok {
		return
	}
	defer p.untrack(c)
	if !p.waitFlowing(cut) {
		return
	}
	target := p.currentTarget()
	if target == "" {
		return // nothing listens: the connection is closed at once
	}
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	if _, ok := p.trackIn(up, cut); !ok {
		return
	}
	defer p.untrack(up)
	done := make(chan struct{}, 2)
	go func() { p.pipe(up, c, cut); done <- struct{}{} }()
	go func() { p.pipe(c, up, cut); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	<-done
}

// pipe copies src to dst, holding what it read while the proxy is paused,
// until either side fails or the connections are cut.
func (p *proxy) pipe(dst, src net.Conn, cut <-chan struct{}) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.waitFlowing(cut) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // io.EOF or a failure: either way this direction is done
		}
	}
}

// waitFlowing blocks while the proxy is paused; false if the connections
// of cut's time were cut meanwhile.
func (p *proxy) waitFlowing(cut <-chan struct{}) bool {
	for {
		p.mu.Lock()
		flowing := p.flowing
		p.mu.Unlock()
		select {
		case <-flowing:
			select {
			case <-cut:
				return false
			default:
				return true
			}
		case <-cut:
			return false
		}
	}
}

// track registers a new client connection; false (and c closed) if the
// proxy is closing.
func (p *proxy) track(c net.Conn) (chan struct{}, bool) {
	p.mu.Lock()
	cut := p.cut
	p.mu.Unlock()
	return p.trackIn(c, cut)
}

// trackIn registers c as a connection of cut's time; false (and c closed)
// if those were cut already.
func (p *proxy) trackIn(c net.Conn, cut chan struct{}) (chan struct{}, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut != cut {
		c.Close()
		return nil, false
	}
	p.conns[c] = struct{}{}
	return cut, true
}

func (p *proxy) untrack(c net.Conn) {
	c.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

func (p *proxy) currentTarget() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.target
}

func (p *proxy) setTarget(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
}

// pause holds every byte, in both directions, until resume.
func (p *proxy) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.flowing:
		p.flowing = make(chan struct{})
	default: // paused already
	}
}

func (p *proxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.flowing:
	default:
		close(p.flowing)
	}
}

// cutAll closes every connection, as the death of the process behind them
// does.
func (p *proxy) cutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.cut)
	p.cut = make(chan struct{})
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// close stops accepting, cuts every connection and waits for their
// goroutines.
func (p *proxy) close() {
	p.ln.Close()
	p.cutAll()
	p.wg.Wait()
}
