// harness_test.go - a real nats-server and the real lanesched daemon for the tests, on a free
// loopback port, with data and logs in a temporary directory the test removes.
// Binaries: LANESCHED_BIN (CTest passes the built daemon), else ../../build/bin/lanesched;
// NATS_SERVER, else nats-server on PATH.
package lanes

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

type env struct {
	t      *testing.T
	dir    string
	url    string
	flags  []string
	nats   *exec.Cmd
	daemon *exec.Cmd
	probe  *nats.Conn
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func daemonBin(t *testing.T) string {
	p := os.Getenv("LANESCHED_BIN")
	if p == "" {
		p, _ = filepath.Abs("../../build/bin/lanesched")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("lanesched binary not found at %s: build it, or set LANESCHED_BIN", p)
	}
	return p
}

func startEnv(t *testing.T, flags ...string) *env {
	e := &env{t: t, dir: t.TempDir(), flags: flags}
	bin := os.Getenv("NATS_SERVER")
	if bin == "" {
		bin = "nats-server"
	}
	port := freePort(t)
	log, _ := os.Create(filepath.Join(e.dir, "nats.log"))
	e.nats = exec.Command(bin, "-a", "127.0.0.1", "-p", strconv.Itoa(port))
	e.nats.Stdout, e.nats.Stderr = log, log
	if err := e.nats.Start(); err != nil {
		t.Fatal(err)
	}
	e.url = "nats://127.0.0.1:" + strconv.Itoa(port)
	t.Cleanup(e.stop)
	var err error
	for end := time.Now().Add(5 * time.Second); ; {
		if e.probe, err = nats.Connect(e.url); err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("nats-server did not start: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.daemonStart()
	return e
}

func (e *env) daemonStart() {
	log, _ := os.OpenFile(filepath.Join(e.dir, "lanesched.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	args := append([]string{"--server", e.url, "--prefix", "lanes", "--data-dir", filepath.Join(e.dir, "data")}, e.flags...)
	e.daemon = exec.Command(daemonBin(e.t), args...)
	e.daemon.Stdout, e.daemon.Stderr = log, log
	if err := e.daemon.Start(); err != nil {
		e.t.Fatal(err)
	}
	for end := time.Now().Add(20 * time.Second); ; {
		if _, err := e.probe.Request("lanes.stats", nil, 500*time.Millisecond); err == nil {
			return
		}
		if time.Now().After(end) {
			b, _ := os.ReadFile(filepath.Join(e.dir, "lanesched.log"))
			e.t.Fatalf("lanesched not answering:\n%s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *env) daemonStop(sig syscall.Signal) {
	if e.daemon == nil {
		return
	}
	e.daemon.Process.Signal(sig)
	err := e.daemon.Wait()
	e.daemon = nil
	if sig == syscall.SIGTERM && err != nil {
		b, _ := os.ReadFile(filepath.Join(e.dir, "lanesched.log"))
		e.t.Fatalf("lanesched exited with %v at SIGTERM:\n%s", err, b)
	}
}

func (e *env) stop() {
	if e.probe != nil {
		e.probe.Close()
	}
	if e.daemon != nil {
		e.daemonStop(syscall.SIGTERM)
	}
	if e.nats != nil {
		e.nats.Process.Kill()
		e.nats.Wait()
	}
}

func (e *env) client(o Options) *Client {
	o.Servers = e.url
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Connect(ctx, o)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func (e *env) counters() map[string]any {
	c := e.client(Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := c.Stats(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return s["counters"].(map[string]any)
}
