// Package s3store keeps the store's objects in an S3 bucket (AWS, or any
// S3-compatible server), under a key prefix: the object at key is the S3
// object prefix/key.
//
// Writes go through store.NewPartWriter: an object shorter than one part
// (8 MiB) is one PutObject; any other is a multipart upload of 8 MiB parts,
// each sent with its SHA-256 (x-amz-checksum-sha256) so the server checks every
// part, completed by CompleteMultipartUpload. Either makes the object visible
// whole at once.
//
// The object's Sum. S3 sets user metadata only when an upload begins, before
// the Sum is known, so multipart objects carry no Sum in their metadata.
// Instead the Sum is read from the checksums S3 itself keeps and checked on
// upload: the composite SHA-256 of a multipart upload ("base64-N") is the
// SHA-256 of its parts' SHA-256s in order, which is exactly store.CombineSums
// over 8 MiB parts (this store's; an object uploaded under the prefix by
// something else in other parts would show a Sum that a verify refuses,
// loudly), and the full-object SHA-256 of a single PutObject of at most 8 MiB
// gives CombineSums of that one part. So Stat and Open report the
// Sum with no extra request, no server-side copy and no sidecar object (a
// second object would make visibility two-step). Objects this store writes
// in one request (PutObject, CopyObject) also carry the Sum in their metadata
// (x-amz-meta-keeper-sum), which wins when present: a server-side copy gets a
// full-object checksum that no longer tells the Sum of a multipart object. A
// server that keeps no SHA-256 checksums leaves Sum "" on Stat and Open for
// multipart objects; Commit always returns it. List, which S3 answers without
// checksums or metadata, leaves Sum "".
//
// It may import package store and the AWS SDK, nothing else of this module.
package s3store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/nats-keeper/nats-keeper/store"
)

// Config says where the store's objects live.
type Config struct {
	Bucket string // the bucket, which must exist: the store never creates one
	Prefix string // keys are Prefix/key; "" puts them at the bucket's root
	// Endpoint is the S3 server's URL (http://127.0.0.1:7070); "" is AWS.
	Endpoint string
	// Region is the bucket's region; "" takes the AWS configuration's
	// (AWS_REGION, the profile), else us-east-1 for a custom Endpoint.
	Region string
	// PathStyle addresses the bucket in the path (endpoint/bucket/key)
	// instead of the host name, as most S3-compatible servers need.
	PathStyle bool
	Logger    *slog.Logger // nil: nothing is logged
}

const (
	maxAttempts  = 5                // per request, the SDK's standard retryer
	maxBackoff   = 5 * time.Second  // between attempts
	dialTimeout  = 5 * time.Second  // per TCP connection
	checkTimeout = 15 * time.Second // Open's HeadBucket, retries included
	// sumMeta is the user metadata that holds the Sum of objects written in
	// one request.
	sumMeta = "keeper-sum"
	// copyLimit is the largest object one CopyObject may copy (S3's limit);
	// larger ones are copied part by part with UploadPartCopy.
	copyLimit = 5 << 30
	// copyPart is the size of those parts, 512 MiB: a 50 GiB object is
	// copied in 100 requests (S3 allows up to 5 GiB and 10,000 parts).
	copyPart = 64 * store.PartSize
)

// Store is a store.Store in an S3 bucket. It also implements store.Copier
// with server-side copies.
type Store struct {
	c         *s3.Client
	transport *http.Transport
	bucket    string
	prefix    string // without a trailing "/"
	url       string // s3://bucket/prefix, with ?endpoint= when not AWS
	log       *slog.Logger
	copyLimit int64 // copyLimit, lowered by tests
	copyPart  int64 // copyPart, lowered by tests
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Copier = (*Store)(nil)
)

// Open connects to the bucket with the standard AWS credentials (the
// environment's AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, the shared
// credentials and config files, AWS_PROFILE, and the rest of the SDK's
// default chain) and checks, with HeadBucket, that the bucket answers and the
// credentials are taken. An unreachable endpoint, refused credentials or a
// missing bucket give an error wrapping store.ErrUnavailable.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := CheckBucket(cfg.Bucket); err != nil {
		return nil, err
	}
	prefix := strings.Trim(cfg.Prefix, "/")
	if prefix != "" {
		if err := store.CheckKey(prefix); err != nil {
			return nil, fmt.Errorf("the S3 key prefix %q is not usable: %w, so the store was not opened", cfg.Prefix, err)
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{bucket: cfg.Bucket, prefix: prefix, log: log, copyLimit: copyLimit, copyPart: copyPart}
	s.url = "s3://" + cfg.Bucket + "/" + prefix
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("the S3 endpoint %q is not an http:// or https:// URL, so the store was not opened", cfg.Endpoint)
		}
		u.User = nil
		s.url += "?endpoint=" + url.QueryEscape(u.String())
	}
	opts := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts, o.MaxBackoff = maxAttempts, maxBackoff
			})
		}),
		// Since service/s3 v1.73.0 the SDK adds CRC32 checksums to every
		// upload, which S3-compatible servers have refused; this store sends
		// its own SHA-256s where it wants them.
		config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
	}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration for %s failed: %w (%w)", s.url, err, store.ErrUnavailable)
	}
	// The SDK's own client has taken AWS_CA_BUNDLE into its transport; keep
	// that transport, with a dial timeout, to close its connections.
	if bc, ok := awsCfg.HTTPClient.(*awshttp.BuildableClient); ok {
		s.transport = bc.GetTransport()
	} else {
		s.transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	s.transport.DialContext = (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext
	awsCfg.HTTPClient = &http.Client{
		Transport:     s.transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	if awsCfg.Region == "" {
		if cfg.Endpoint == "" {
			return nil, fmt.Errorf("no region is set for %s (give one, or set AWS_REGION), so the store was not opened: %w", s.url, store.ErrUnavailable)
		}
		awsCfg.Region = "us-east-1"
	}
	s.c = s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		o.UsePathStyle = cfg.PathStyle
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
	})
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	if _, err := s.c.HeadBucket(cctx, &s3.HeadBucketInput{Bucket: aws.String(s.bucket)}); err != nil {
		s.transport.CloseIdleConnections()
		return nil, fmt.Errorf("the bucket %s %s, so the store was not opened: %w (%w)", s.url, whyNot(err), err, store.ErrUnavailable)
	}
	log.Debug("opened the S3 store", "url", s.url)
	return s, nil
}

// full is the S3 key of the store's key.
func (s *Store) full(key string) string {
	if s.prefix == "" {
		return key
	}
	return s.prefix + "/" + key
}

// Describe says what the store is and what it guarantees.
func (s *Store) Describe() store.Description {
	return store.Description{
		URL:  s.url,
		Kind: "s3",
		Publish: "An object of at most 8 MiB is one PutObject; a larger one is a multipart upload of 8 MiB parts, " +
			"each checked by the server against its SHA-256 (a signed header; the body is sent as UNSIGNED-PAYLOAD, so it is hashed once), made visible whole by CompleteMultipartUpload. " +
			"Either is atomic: readers see the old object or the new one. An upload never completed stays invisible " +
			"until Sweep aborts it (a bucket lifecycle rule that aborts incomplete uploads does the same). The part that " +
			"holds a held range (an archive's stream header, patched at the stream's end) is first put as an object " +
			"of its own under " + heldDir + "/, read back and patched when the hold ends, then uploaded as its part and " +
			"removed; List never shows " + heldDir + "/, and Sweep removes what a crash left there.",
		Ranges: "Native: every read is a ranged GET pinned to the object's ETag (If-Match), so an object replaced " +
			"while open fails the read instead of mixing; ReadAt keeps the last 1 MiB block it fetched.",
		Listing: "ListObjectsV2, which shows completed objects only. AWS S3 has strong read-after-write " +
			"consistency for puts, deletes and lists since December 2020; an S3-compatible server may not " +
			"(versitygw over POSIX, used in the tests, lists the directory and is consistent).",
	}
}

// Close releases the store's idle connections; it is safe twice.
func (s *Store) Close() error {
	s.transport.CloseIdleConnections()
	return nil
}

// fail is the error of op on key: it wraps store.ErrNotFound when the object
// is missing and store.ErrUnavailable when the server could not be reached or
// refused the credentials or the bucket, with err.
func (s *Store) fail(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	switch classify(err) {
	case missing:
		return fmt.Errorf("%s: %w (%w)", what, store.ErrNotFound, err)
	case unavailable:
		return fmt.Errorf("%s: %w (%w)", what, store.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// failWrite is fail for a write's request (a part's upload, the upload's
// beginning or completion, a short object's put, a held part's keeping):
// an answer that says the store has no room wraps store.ErrFull, and any
// other refusal of the request (a 4xx that is not about the key, the
// bucket or the credentials) wraps store.ErrRefused, which a quota may be
// behind.
func (s *Store) failWrite(err error, format string, args ...any) error {
	if classify(err) == other {
		what := fmt.Sprintf(format, args...)
		switch code, st := apiCode(err), status(err); {
		case roomCodes[code] || st == http.StatusInsufficientStorage:
			return fmt.Errorf("%s: %w (%w)", what, store.ErrFull, err)
		case st >= 400 && st < 500:
			return fmt.Errorf("%s: %w (%w)", what, store.ErrRefused, err)
		}
	}
	return s.fail(err, format, args...)
}

// roomCodes are the S3 error codes (AWS's, and those of S3-compatible
// servers) that say a write found no room: an object over the store's
// limit, a quota reached, a full disk.
var roomCodes = map[string]bool{
	"EntityTooLarge": true, "QuotaExceeded": true, "XMinioAdminBucketQuotaExceeded": true,
	"XMinioStorageFull": true, "StorageFull": true, "InsufficientStorage": true, "ServiceQuotaExceeded": true,
}

// apiCode is the S3 error code of err, or "".
func apiCode(err error) string {
	if ae, ok := errors.AsType[smithy.APIError](err); ok {
		return ae.ErrorCode()
	}
	return ""
}

type kind int

const (
	other kind = iota
	missing
	unavailable
)

// classify tells a missing object from an unreachable or refusing server.
func classify(err error) kind {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return other
	}
	code := ""
	if ae, ok := errors.AsType[smithy.APIError](err); ok {
		code = ae.ErrorCode()
	}
	switch code {
	case "NoSuchBucket", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken":
		return unavailable
	case "NoSuchKey", "NotFound":
		return missing
	}
	switch status(err) {
	case 0: // no answer: the network, or no credentials to sign with
		return unavailable
	case http.StatusNotFound:
		return missing
	case http.StatusForbidden:
		return unavailable
	}
	return other
}

// status is the HTTP status of the server's answer, 0 when there was none
// (the SDK wraps a failed connection as a response error of status 0).
func status(err error) int {
	if re, ok := errors.AsType[*awshttp.ResponseError](err); ok {
		return re.HTTPStatusCode()
	}
	return 0
}

// whyNot says why HeadBucket failed.
func whyNot(err error) string {
	code := status(err)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("did not answer in %v", checkTimeout)
	case code == 0:
		return "could not be reached, or no credentials were found"
	case code == http.StatusForbidden:
		return "refused the credentials"
	case code == http.StatusNotFound:
		return "does not exist, or the server does not know the access key (nats-keeper never creates buckets)"
	}
	return fmt.Sprintf("answered HeadBucket with HTTP %d", code)
}
