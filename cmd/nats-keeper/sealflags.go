package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/nats-keeper/nats-keeper/agecrypt"
)

// sealFlags are the encryption-at-rest flags: serve takes all three, import
// the recipients (an imported point is encrypted as a serving keeper's
// would be), export the identity (it decrypts what it writes out).
type sealFlags struct {
	EncryptTo     []string // age recipients every new archive is encrypted to
	EncryptToFile string   // a file of more of them, one a line
	Identity      string   // an age identity file that decrypts stored archives
}

// addEncrypt adds --encrypt-to and --encrypt-to-file.
func (f *sealFlags) addEncrypt(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.EncryptTo, "encrypt-to", nil, "encrypt every new archive of points and asides (bus.tar.age) to this age X25519 recipient (age1…); repeat it for more")
	fs.StringVar(&f.EncryptToFile, "encrypt-to-file", "", "encrypt every new archive to the age recipients of this file, one a line (# comments)")
}

// addIdentity adds --identity; why says what needs it.
func (f *sealFlags) addIdentity(fs *pflag.FlagSet, why string) {
	fs.StringVar(&f.Identity, "identity", "", "age identity file (0600, as age-keygen writes it) that decrypts encrypted points and asides: "+why)
}

// open reads the flags: the recipients of --encrypt-to and
// --encrypt-to-file (nil Sealer when there are none) and the identities of
// --identity (nil Opener when not given).
func (f sealFlags) open() (*agecrypt.Sealer, *agecrypt.Opener, error) {
	recipients := append([]string(nil), f.EncryptTo...)
	if f.EncryptToFile != "" {
		more, err := agecrypt.ReadRecipientsFile(f.EncryptToFile)
		if err != nil {
			return nil, nil, fmt.Errorf("--encrypt-to-file: %w", err)
		}
		recipients = append(recipients, more...)
	}
	var seal *agecrypt.Sealer
	if len(recipients) > 0 {
		s, err := agecrypt.NewSealer(recipients)
		if err != nil {
			return nil, nil, fmt.Errorf("--encrypt-to: %w", err)
		}
		seal = s
	}
	var unseal *agecrypt.Opener
	if f.Identity != "" {
		ids, err := agecrypt.ReadIdentityFile(f.Identity)
		if err != nil {
			return nil, nil, fmt.Errorf("--identity: %w", err)
		}
		unseal = agecrypt.NewOpener(ids)
	}
	return seal, unseal, nil
}
