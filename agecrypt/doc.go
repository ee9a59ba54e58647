// Package agecrypt keeps restore points' and asides' archives encrypted at
// rest with age (filippo.io/age, X25519 recipients): what the keeper stores
// is an age file that `age -d` turns back into the plain bus.tar.
//
// Writing needs only the recipients' public keys (Sealer). The archive
// writer patches a data entry's tar header once the entry's size is known
// (store.Writer's Hold and WriteAt), so the encrypting Writer cannot be a
// plain sequential age stream: it writes age's own header (made by
// age.Encrypt) and then seals the payload chunk by chunk as the format
// defines it (64 KiB chunks, ChaCha20-Poly1305, a counter nonce), holding
// back in memory only the at most two chunks that a held range touches and
// sealing them, once, when the hold ends. So one pass, bounded memory, and
// no nonce is ever used twice.
//
// Reading needs an identity (Opener). A stored archive opens as a
// store.Object of the plaintext: ReadAt through age.DecryptReaderAt (the
// archive reader's random reads of tar headers and the manifest), Reader
// through one ranged read of the ciphertext, decrypted chunk by chunk, so a
// restore streams with bounded memory from every store backend.
//
// It owns the age encryption of archives at rest. It imports package store
// (the Writer it wraps) and filippo.io/age, nothing of the keeper or the
// bus.
package agecrypt
