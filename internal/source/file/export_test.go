package file

// HashedBytes returns how many bytes the Source has put through its prefix
// checksum so far.
func (s *Source) HashedBytes() int64 { return s.hashed }

// CheckCursor decodes c and reports whether it re-encodes to itself.
func CheckCursor(c string) (roundTrips bool, err error) {
	p, err := parseCursor(c)
	if err != nil {
		return false, err
	}
	return p.String() == c, nil
}

// CursorRecords returns the number of records before cursor c.
func CursorRecords(c string) (int64, error) {
	p, err := parseCursor(c)
	return p.recno, err
}
