package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"filippo.io/age"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/nats-keeper/nats-keeper/internal/tools"
)

// The store backends a run can measure, each through a keeper of its own on
// the same bus and the same kept data.
const (
	StoreFile = "file" // --dir: the keeper of the nats CLI comparison, and the reference of every store ratio
	StoreNats = "nats" // a JetStream object store, R1, on a second nats-server (the vault)
	StoreBus  = "bus"  // a JetStream object store, R1, on the bus the kept data is on
	StoreS3   = "s3"   // a bucket on a versitygw process over a directory
	StoreAge  = "age"  // a directory, every archive encrypted at rest (--encrypt-to, --identity)
)

// DefaultStores are the backends a run measures unless told otherwise.
func DefaultStores() []string { return []string{StoreFile, StoreNats, StoreS3, StoreAge} }

// ParseStores reads a comma-separated list of backends such as file,nats,s3.
func ParseStores(s string) ([]string, error) {
	out := commaList(s)
	return out, checkStores(out)
}

func checkStores(stores []string) error {
	if !slices.Contains(stores, StoreFile) {
		return fmt.Errorf("stores %q lack %s, the reference of every store ratio, so nothing was run", strings.Join(stores, ","), StoreFile)
	}
	for i, s := range stores {
		if !slices.Contains([]string{StoreFile, StoreNats, StoreBus, StoreS3, StoreAge}, s) {
			return fmt.Errorf("store %q is not file, nats, bus, s3 or age, so nothing was run", s)
		}
		if slices.Contains(stores[:i], s) {
			return fmt.Errorf("store %q is named twice, so nothing was run", s)
		}
	}
	return nil
}

// Names of what the store backends hold.
const (
	vaultBucket = "keeper_points" // the object store, on the vault or on the bus (not a name of the kept data's module)
	s3Bucket    = "keeper-points"
	s3Prefix    = "bench"
	s3Region    = "us-east-1"
)

// startStores starts the servers of the backends other than file (the
// vault's nats-server, versitygw) and a keeper for each, after the file
// keeper.
func (r *run) startStores(ctx context.Context, keeperBin, serverBin string) error {
	for _, name := range r.cfg.Stores {
		spec := keeperSpec{store: name}
		switch name {
		case StoreFile:
			continue
		case StoreNats:
			port, err := freePort()
			if err != nil {
				return err
			}
			r.res.StoreCommands = append(r.res.StoreCommands, "nats-server -js -sd DIR/vault -a 127.0.0.1 -p VAULTPORT -n vault")
			if r.vault, err = startProc("nats-server (vault)", r.env, serverBin, "-js", "-sd", filepath.Join(r.work, "vault"),
				"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-n", "vault"); err != nil {
				return err
			}
			nc, err := connectRetry(ctx, "nats://127.0.0.1:"+strconv.Itoa(port), r.vault)
			if err != nil {
				return err
			}
			nc.Close()
			spec.side = r.vault
			spec.args = []string{"--store", "nats://127.0.0.1:" + strconv.Itoa(port) + "/" + vaultBucket, "--store-replicas", "1"}
			spec.shownArgs = []string{"--store", "nats://127.0.0.1:VAULTPORT/" + vaultBucket, "--store-replicas", "1"}
		case StoreBus:
			spec.args = []string{"--store", r.url + "/" + vaultBucket, "--store-replicas", "1"}
			spec.shownArgs = []string{"--store", "nats://127.0.0.1:PORT/" + vaultBucket, "--store-replicas", "1"}
		case StoreAge:
			recipient, key, err := r.writeAgeKey()
			if err != nil {
				return err
			}
			dir := filepath.Join(r.work, "keeper-age")
			spec.args = []string{"--store", "file://" + dir, "--encrypt-to", recipient, "--identity", key}
			spec.shownArgs = []string{"--store", "file://DIR-age", "--encrypt-to", "RECIPIENT", "--identity", "DIR/age.key"}
		case StoreS3:
			endpoint, access, secret, err := r.startVersityGW(ctx)
			if err != nil {
				return err
			}
			spec.side = r.gw
			spec.args = []string{"--store", "s3://" + s3Bucket + "/" + s3Prefix, "--s3-endpoint", endpoint, "--s3-region", s3Region, "--s3-path-style"}
			spec.shownArgs = slices.Clone(spec.args)
			spec.shownArgs[3] = "http://127.0.0.1:GWPORT"
			spec.env = []string{"AWS_ACCESS_KEY_ID=" + access, "AWS_SECRET_ACCESS_KEY=" + secret, "AWS_REGION=" + s3Region}
			spec.shownEnv = []string{"AWS_ACCESS_KEY_ID=ACCESS", "AWS_SECRET_ACCESS_KEY=SECRET", "AWS_REGION=" + s3Region}
		}
		k, err := r.startKeeper(ctx, keeperBin, spec)
		if err != nil {
			return err
		}
		r.res.StoreCommands = append(r.res.StoreCommands, k.command)
	}
	return nil
}

// startVersityGW runs versitygw over a directory of the run with fresh
// credentials, waits until it answers, and makes the bucket (the keeper
// never makes one).
func (r *run) startVersityGW(ctx context.Context) (endpoint, access, secret string, err error) {
	bin, err := tools.VersityGWPath(ctx)
	if err != nil {
		return "", "", "", fmt.Errorf("install versitygw: %w", err)
	}
	r.res.VersityGW = tools.VersityGWVersion
	port, err := freePort()
	if err != nil {
		return "", "", "", err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	access, secret = "keeperbench", rand.Text()
	r.res.StoreCommands = append(r.res.StoreCommands, "versitygw --port 127.0.0.1:GWPORT --access ACCESS --secret SECRET --quiet posix --data-integrity-etag DIR/s3",
		fmt.Sprintf("create the bucket %s on versitygw through an S3 client (the keeper never makes buckets)", s3Bucket))
	if r.gw, err = startProc("versitygw", r.env, bin, "--port", addr, "--access", access, "--secret", secret, "--quiet", "posix", "--data-integrity-etag", filepath.Join(r.work, "s3")); err != nil {
		return "", "", "", err
	}
	endpoint = "http://" + addr
	for deadline := time.Now().Add(30 * time.Second); ; {
		// Any HTTP answer (an anonymous request is refused) means it serves.
		resp, err := http.Get(endpoint + "/")
		if err == nil {
			resp.Body.Close()
			break
		}
		if !r.gw.running() || time.Now().After(deadline) || ctx.Err() != nil {
			return "", "", "", fmt.Errorf("versitygw on %s did not answer (%v); its log:\n%s", addr, err, r.gw.tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
	c := s3.New(s3.Options{BaseEndpoint: aws.String(endpoint), Region: s3Region, UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(access, secret, "")})
	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := c.CreateBucket(bctx, &s3.CreateBucketInput{Bucket: aws.String(s3Bucket)}); err != nil {
		return "", "", "", fmt.Errorf("create bucket %s on versitygw: %w", s3Bucket, err)
	}
	return endpoint, access, secret, nil
}

// writeAgeKey makes an age identity for the encrypting keeper, in a 0600
// file of the run's directory, and returns its recipient and the file.
func (r *run) writeAgeKey() (recipient, path string, err error) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return "", "", err
	}
	path = filepath.Join(r.work, "age.key")
	if err := os.WriteFile(path, []byte(id.String()+"\n"), 0o600); err != nil {
		return "", "", fmt.Errorf("write the age identity: %w", err)
	}
	return id.Recipient().String(), path, nil
}

// stopSides stops the store servers.
func (r *run) stopSides() {
	for _, p := range []*proc{r.vault, r.gw} {
		if p != nil {
			if err := p.stop(time.Minute); err != nil && !errors.Is(err, context.Canceled) {
				r.cfg.Log.Debug("stopping "+p.name, "err", err)
			}
		}
	}
}
