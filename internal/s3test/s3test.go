// Package s3test runs a real S3 server for tests: versitygw (installed by
// internal/tools) over a directory the test owns, on 127.0.0.1 and a free
// port, killed when the test ends.
//
// It may import internal/tools and internal/syncbuf, and the AWS SDK to make
// buckets.
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/nats-keeper/nats-keeper/internal/syncbuf"
	"github.com/nats-keeper/nats-keeper/internal/tools"
)

// Start runs versitygw over a directory under t.TempDir() with fresh
// credentials, waits until it answers HTTP, and kills it at cleanup. It
// returns the endpoint (http://127.0.0.1:PORT) and the root user's access key
// and secret. Make buckets with MakeBucket.
func Start(t testing.TB) (endpoint, access, secret string) {
	t.Helper()
	bin := tools.VersityGW(t)
	access, secret = "keeper"+token(6), token(20)
	addr, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	endpoint = "http://" + addr
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--port", addr, "--access", access, "--secret", secret, "--quiet", "posix", t.TempDir())
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start versitygw: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		<-exited
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		// Any HTTP answer (an anonymous request is refused with 403) means
		// the server is serving.
		resp, err := http.Get(endpoint + "/")
		if err == nil {
			resp.Body.Close()
			return endpoint, access, secret
		}
		select {
		case err := <-exited:
			t.Fatalf("versitygw on %s exited before it answered: %v\n%s", addr, err, out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw on %s did not answer in 30 s: %v\n%s", addr, err, out.String())
		}
	}
}

// MakeBucket creates bucket on the server at endpoint through an S3 client,
// as an operator would; nats-keeper itself never creates buckets.
func MakeBucket(t testing.TB, endpoint, access, secret, bucket string) {
	t.Helper()
	c := s3.New(s3.Options{
		BaseEndpoint: aws.String(endpoint),
		Region:       "us-east-1",
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(access, secret, ""),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket %s on %s: %v", bucket, endpoint, err)
	}
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port for versitygw: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func token(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
