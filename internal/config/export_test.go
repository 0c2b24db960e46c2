package config

// Unexported helpers the external tests check directly.
var (
	RedactDSN  = redactDSN
	DSNSecrets = dsnSecrets
	Suggest    = suggest
)

const MaxFileSize = maxFileSize
