package agecrypt

import "errors"

// Errors for errors.Is.
var (
	// ErrNoIdentity: the archive is encrypted and no identity was given.
	ErrNoIdentity = errors.New("the archive is encrypted and this keeper has no identity to decrypt it")
	// ErrWrongIdentity: none of the identities given opens the archive.
	ErrWrongIdentity = errors.New("the archive is encrypted to other recipients than this keeper's identity")
	// ErrDamaged: the ciphertext does not decrypt (a flipped byte, a
	// truncation): its authentication failed.
	ErrDamaged = errors.New("the encrypted archive does not decrypt: its ciphertext is damaged")
)
