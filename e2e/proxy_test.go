package e2e

import (
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// dropProxy forwards TCP between clients and a nats-server. Once armed, the
// first time a client sends trigger (say a JetStream API subject), it
// forwards that request to the server, lets nothing the server answers
// through, and after a moment closes both sides: the server did the request
// but the client never hears the reply, as when a connection drops at the
// worst time. Later connections are forwarded normally.
type dropProxy struct {
	ln      net.Listener
	target  string
	trigger []byte
	armed   atomic.Bool
	fired   chan struct{}
	once    sync.Once
}

func startDropProxy(t *testing.T, target string, trigger []byte) *dropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{ln: ln, target: target, trigger: trigger, fired: make(chan struct{})}
	t.Cleanup(func() { ln.Close() })
	go p.serve()
	return p
}

func (p *dropProxy) addr() string { return p.ln.Addr().String() }

func (p *dropProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		go p.pair(c, s)
	}
}

func (p *dropProxy) pair(c, s net.Conn) {
	var mute atomic.Bool // set: nothing more from the server reaches the client
	closeBoth := func() { c.Close(); s.Close() }
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := s.Read(buf)
			if n > 0 && !mute.Load() {
				if _, werr := c.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		closeBoth()
	}()
	buf := make([]byte, 64<<10)
	var carry []byte // the end of the last read, so a trigger split across reads is seen
	for {
		n, err := c.Read(buf)
		if n > 0 {
			seen := append(carry, buf[:n]...)
			if p.armed.Load() && bytes.Contains(seen, p.trigger) {
				fire := false
				p.once.Do(func() { fire = true })
				if fire {
					mute.Store(true)
					s.Write(buf[:n])
					time.Sleep(500 * time.Millisecond) // the server does it; the reply goes nowhere
					closeBoth()
					close(p.fired)
					return
				}
			}
			if _, werr := s.Write(buf[:n]); werr != nil {
				break
			}
			if len(seen) > len(p.trigger) {
				carry = append([]byte(nil), seen[len(seen)-len(p.trigger):]...)
			} else {
				carry = seen
			}
		}
		if err != nil {
			break
		}
	}
	_, _ = io.Copy(io.Discard, c)
	closeBoth()
}
