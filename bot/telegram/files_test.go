package telegram

import (
	"errors"
	"io"
	"net/url"
	"strings"
	"testing"
)

const token = "1001:AAEtoken-a_0123456789abcdefghijklmn"

// A failed download's error never carries the file URL, which holds the
// bot's token.
func TestDownloadErrorsHideTheToken(t *testing.T) {
	err := withoutURL(&url.Error{Op: "Get", URL: "https://api.telegram.org/file/bot" + token + "/voice/file_1.oga", Err: io.ErrUnexpectedEOF})
	if strings.Contains(err.Error(), token) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("error %q", err)
	}
}
