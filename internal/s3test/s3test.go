// Package s3test runs a real S3 server for tests: versitygw serving a
// directory (`versitygw posix DIR`), on a loopback port, one process per
// Start, so a test can kill it mid-upload and start it again. .ci/run
// installs versitygw (go install); where it is missing, tests that need it
// skip, saying how to install it.
package s3test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/scrfs/scrfs/internal/testutil"
)

// Version is the versitygw that .ci/run installs.
const Version = "v1.8.0"

// Credentials of the server's root account.
const (
	AccessKey = "scrfs-test"
	SecretKey = "scrfs-test-secret-0123456789"
)

// Bucket is the bucket Start creates.
const Bucket = "scrfs-test"

// Binary returns versitygw's path: on PATH, else where go install puts it.
func Binary() (string, error) {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
			gopath = strings.TrimSpace(string(out))
		}
	}
	for _, dir := range filepath.SplitList(gopath) {
		p := filepath.Join(dir, "bin", "versitygw")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("versitygw not found: go install github.com/versity/versitygw/cmd/versitygw@%s (.ci/run does)", Version)
}

// Server is a running versitygw.
type Server struct {
	bin  string
	Dir  string // the directory it serves: <Dir>/<bucket>/<object>
	Addr string // host:port on loopback
	cmd  *exec.Cmd
	done chan struct{}
}

// Start runs a server on a free loopback port over a new directory, with
// Bucket created, and stops it when the test ends. It skips the test if
// versitygw is not installed.
func Start(t testing.TB) *Server {
	t.Helper()
	if _, err := Binary(); err != nil {
		t.Skip(err)
	}
	s, err := Run(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

// Run is Start outside a test (a benchmark), over dir (created if
// missing): the caller kills the server.
func Run(dir string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	s := &Server{bin: bin, Dir: dir, Addr: addr}
	if err := s.Restart(); err != nil {
		return nil, err
	}
	if _, err := s.Client().CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(Bucket)}); err != nil {
		s.Kill()
		return nil, fmt.Errorf("create bucket %s: %w", Bucket, err)
	}
	return s, nil
}

// startWait bounds how long a server may take to accept connections.
const startWait = 20 * time.Second

// Restart starts the server (again, after Kill) on its port and returns
// once it accepts connections.
func (s *Server) Restart() error {
	s.cmd = exec.Command(s.bin, "--access", AccessKey, "--secret", SecretKey, "--port", s.Addr, "--quiet", "posix", s.Dir)
	// Its own process group: a test's kill reaches it alone.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start versitygw: %w", err)
	}
	done := make(chan struct{})
	s.done = done
	cmd := s.cmd
	go func() {
		cmd.Wait()
		close(done)
	}()
	// Nothing announces that it listens but the port: poll it.
	exited := false
	up := testutil.Poll(startWait, func() bool {
		select {
		case <-done:
			exited = true
			return true
		default:
		}
		c, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	switch {
	case exited:
		return fmt.Errorf("versitygw on %s exited at start", s.Addr)
	case !up:
		s.Kill()
		return fmt.Errorf("versitygw not accepting connections on %s within %v", s.Addr, startWait)
	}
	return nil
}

// Pid is the server's process id, for its CPU time.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Kill ends the server at once, as a crash, and waits for it.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// URL is the endpoint, as AWS_ENDPOINT_URL_S3 gives it.
func (s *Server) URL() string { return "http://" + s.Addr }

// Prefix returns the scrfs prefix URL of path in the bucket.
func (s *Server) Prefix(path string) string { return "s3://" + Bucket + "/" + path }

// Env is the environment that points an AWS client (a daemon) at the
// server: endpoint, region and the root account's keys, nothing from the
// user's own AWS configuration.
func (s *Server) Env() []string {
	return []string{
		"AWS_ENDPOINT_URL_S3=" + s.URL(),
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=" + AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + SecretKey,
		"AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// Setenv sets Env in this process for the test (the prefix package's
// clients read it).
func (s *Server) Setenv(t testing.TB) {
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// Client returns an S3 client of the root account, for a test to look at
// or change objects behind scrfs's back.
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(s.URL()), UsePathStyle: true, Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
	})
}
