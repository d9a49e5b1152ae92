;;; session.el --- Emacs and eglot against the real `vramscope lsp' (lsp/emacs_test.go)  -*- lexical-binding: t -*-
;; The setup of docs/editors.md, then: attach, the OOM's diagnostic (flymake),
;; hover, two lines inserted above (the diagnostic moves with its line), and the
;; flame-graph command. Each step records what it saw in $VRAMSCOPE_RESULT
;; (JSON); the Go test judges it.
(require 'package)
(package-initialize) ; Debian's elpa-eglot lives in the system's package directory
(require 'eglot)
(require 'json)
(require 'python)

(defvar vs-steps nil)
(defun vs-record (name ok detail)
  (push `((step . ,name) (ok . ,(if ok t :json-false)) (detail . ,(format "%S" detail))) vs-steps))
(defun vs-wait (pred &optional secs)
  "Wait up to SECS (10) seconds for PRED, serving the server's messages."
  (let ((end (+ (float-time) (or secs 10))) ok)
    (while (and (not (setq ok (funcall pred))) (< (float-time) end))
      (accept-process-output nil 0.05))
    ok))

;; The setup docs/editors.md gives.
(add-to-list 'eglot-server-programs
             `((python-mode python-ts-mode)
               . (,(getenv "VRAMSCOPE_BIN") "lsp" "--daemon" "off"
                  :initializationOptions
                  (:vramscope (:snapshot ,(getenv "VRAMSCOPE_SNAPSHOT") :hintThreshold 0.01)))))

(find-file (expand-file-name "trainer/train_gpt2.py" (getenv "VRAMSCOPE_FIXTURES")))
(setq buffer-read-only nil)
(python-mode)
;; M-x eglot (eglot-ensure waits for a command loop batch mode does not run).
(apply #'eglot (eglot--guess-contact))
(vs-record "attach" (vs-wait (lambda () (eglot-current-server)) 15) (eglot-current-server))

(defconst vs-forward "out = model(input_ids=ids, labels=ids)")
(defun vs-line-of (text)
  (save-excursion
    (goto-char (point-min))
    (when (search-forward text nil t) (line-number-at-pos))))
(defun vs-diag-lines ()
  (mapcar (lambda (d) (with-current-buffer (flymake-diagnostic-buffer d)
                        (line-number-at-pos (flymake-diagnostic-beg d))))
          (flymake-diagnostics)))

(let (lines)
  (vs-record "diagnostic on the OOM line"
             (vs-wait (lambda () (setq lines (vs-diag-lines)) (memq (vs-line-of vs-forward) lines)) 15)
             (list :lines lines :forward (vs-line-of vs-forward))))

(save-excursion
  (goto-char (point-min))
  (search-forward vs-forward)
  (let* ((server (eglot-current-server))
         (hover (jsonrpc-request server :textDocument/hover (eglot--TextDocumentPositionParams)))
         (value (plist-get (plist-get hover :contents) :value)))
    (vs-record "hover" (and value (string-match-p "live at peak" value) (string-match-p "\\[modeling_gpt2.py:" value)) value)))

(goto-char (point-min))
(insert "import sys\n\n")
(eglot--signal-textDocument/didChange)
(let (lines)
  (vs-record "diagnostic follows two inserted lines"
             (vs-wait (lambda () (setq lines (vs-diag-lines)) (and (equal (vs-line-of vs-forward) 24) (memq 24 lines))))
             (list :lines lines :forward (vs-line-of vs-forward))))

(let ((page (eglot-execute-command (eglot-current-server) "vramscope.flameGraph" [])))
  (vs-record "flame graph command writes the page"
             (and (plist-get page :path) (file-readable-p (plist-get page :path))) page))

(with-temp-file (getenv "VRAMSCOPE_RESULT")
  (insert (json-encode `((steps . ,(vconcat (reverse vs-steps)))))))
(set-buffer-modified-p nil)
(kill-emacs 0)
