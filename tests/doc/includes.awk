# SPDX-License-Identifier: MIT
# Used by tests/doc/test_layers.sh: lists the #include directives of one C
# file as the preprocessor sees them, so that no spelling walks around the
# layer table. Comments are removed first (a directive inside /* */ is none,
# and "#include /**/ <x.h>" is one), continued lines are joined, and each
# included path is resolved the way the build does (-I src): a quoted path
# first next to the file, then as an angle path: under include/ (the public
# header, -I include comes first), then under src/.
# Paths are normalised ("rt/../server/x.h" is "server/x.h").
# Variables: top (the checkout), rel (the file, relative to top).
# Output, one line per directive:
#   LINE FORM RAW RESOLVED
# FORM is q ("..."), a (<...>) or m (a macro); RAW is the path as written,
# normalised; RESOLVED is the header under src/ or include/ it names, relative to top,
# or "-" when it names none (libc, a library, a generated file).

function normpath(p,    n, i, parts, out, k, s) {
	n = split(p, parts, "/")
	k = 0
	for (i = 1; i <= n; i++) {
		if (parts[i] == "" || parts[i] == ".")
			continue
		if (parts[i] == ".." && k > 0 && out[k] != "..") {
			k--
			continue
		}
		out[++k] = parts[i]
	}
	s = p ~ /^\// ? "/" : ""
	for (i = 1; i <= k; i++)
		s = s (i > 1 ? "/" : "") out[i]
	return s
}

function exists(p,    line, r) {
	r = (getline line < p)
	if (r >= 0)
		close(p)
	return r >= 0
}

function resolve(form, path,    d, c, t) {
	if (path ~ /^\//) { # absolute: under the checkout, or nothing of ours
		c = normpath(path)
		t = normpath(top)
		if (index(c, t "/") == 1 && exists(c))
			return substr(c, length(t) + 2)
		return "-"
	}
	if (form == "q") {
		d = rel
		sub("/[^/]*$", "", d)
		c = normpath(d "/" path)
		if (c ~ /^(src|include)\// && exists(top "/" c))
			return c
	}
	c = normpath("include/" path)
	if (c ~ /^include\// && exists(top "/" c))
		return c
	c = normpath("src/" path)
	if (c ~ /^src\// && exists(top "/" c))
		return c
	return "-"
}

{
	line = $0
	start = NR
	# Join continued lines.
	while (line ~ /\\$/ && (getline more) > 0) {
		sub(/\\$/, "", line)
		line = line more
	}
	# Remove comments, carrying an open /* over to the next lines.
	out = ""
	while (line != "") {
		if (incomment) {
			i = index(line, "*/")
			if (i == 0) {
				line = ""
				break
			}
			line = substr(line, i + 2)
			incomment = 0
			out = out " "
			continue
		}
		b = index(line, "/*")
		s = index(line, "//")
		if (b == 0 && s == 0) {
			out = out line
			break
		}
		if (s != 0 && (b == 0 || s < b)) {
			out = out substr(line, 1, s - 1)
			break
		}
		out = out substr(line, 1, b - 1)
		line = substr(line, b + 2)
		incomment = 1
	}
	if (out !~ /^[ \t]*#[ \t]*include/)
		next
	sub(/^[ \t]*#[ \t]*include[ \t]*/, "", out)
	if (out ~ /^"[^"]*"/) {
		form = "q"
		path = substr(out, 2, index(substr(out, 2), "\"") - 1)
	} else if (out ~ /^<[^>]*>/) {
		form = "a"
		path = substr(out, 2, index(out, ">") - 2)
	} else {
		print start, "m", "-", "-"
		next
	}
	print start, form, normpath(path), resolve(form, path)
}
