use super::*;

fn workspace(files: &[(&str, &str)]) -> (tempfile::TempDir, Workspace) {
    let dir = tempfile::tempdir().expect("tmp");
    for (p, c) in files {
        let full = dir.path().join(p);
        std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        std::fs::write(full, c).expect("write");
    }
    let ws = Workspace::open(dir.path(), ToolLimits::default()).expect("open");
    (dir, ws)
}

fn edit(path: &str, search: &str, replace: &str) -> ToolRequest {
    ToolRequest::Edit {
        path: path.into(),
        search: search.into(),
        replace: replace.into(),
    }
}

#[test]
fn paths_are_normalised_or_refused() {
    assert_eq!(Workspace::resolve("./a/b.py"), Ok("a/b.py".into()));
    assert_eq!(
        Workspace::resolve(&format!("{GUEST_WORK}/a/../b.py")),
        Ok("b.py".into())
    );
    assert_eq!(Workspace::resolve(GUEST_WORK), Ok(String::new()));
    assert!(Workspace::resolve(&format!("{GUEST_WORK}x/a.py")).is_err());
    assert_eq!(Workspace::resolve("."), Ok(String::new()));
    for bad in ["/etc/passwd", "../x", "a/../../x", "~/x", "a\\..\\x"] {
        assert!(Workspace::resolve(bad).is_err(), "{bad}");
    }
}

#[test]
fn edit_requires_a_unique_verbatim_match_and_undo_restores() {
    let src = "def f(x):\n    return x\n\n\ndef g(x):\n    return x\n";
    let (dir, mut ws) = workspace(&[("m.py", src)]);
    let out = ws.execute(&edit("m.py", "    return x", "    return -x"));
    assert!(
        out.is_error && out.text.contains("2 times") && out.text.contains("[2, 6]"),
        "{}",
        out.text
    );
    let out = ws.execute(&edit("m.py", "return  y", "z"));
    assert!(
        out.is_error && out.text.contains("did not appear verbatim"),
        "{}",
        out.text
    );
    let out = ws.execute(&edit("m.py", "def g(x):\nreturn x", "z"));
    assert!(
        out.text
            .contains("Lines 5-6 match if whitespace is ignored"),
        "{}",
        out.text
    );
    let out = ws.execute(&edit(
        "m.py",
        "def g(x):\n    return x",
        "def g(x):\n    return -x",
    ));
    assert!(!out.is_error, "{}", out.text);
    assert!(out.text.contains("return -x"), "{}", out.text);
    let now = std::fs::read_to_string(dir.path().join("m.py")).expect("read");
    assert!(now.ends_with("    return -x\n"));
    assert!(!ws.execute(&ToolRequest::Undo).is_error);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("m.py")).expect("read"),
        src
    );
    assert!(ws.execute(&ToolRequest::Undo).is_error);
}

#[test]
fn view_insert_create_search_and_list() {
    let (dir, mut ws) = workspace(&[("pkg/a.py", "x = 1\ny = 2\n"), ("README", "hi\n")]);
    let out = ws.execute(&ToolRequest::View {
        path: "pkg/a.py".into(),
        start: Some(2),
        end: None,
    });
    assert_eq!(out.text, "     2\ty = 2\n");
    let out = ws.execute(&ToolRequest::Insert {
        path: "pkg/a.py".into(),
        line: 1,
        text: "z = 3".into(),
    });
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("pkg/a.py")).expect("read"),
        "x = 1\nz = 3\ny = 2\n"
    );
    let out = ws.execute(&ToolRequest::Create {
        path: "pkg/a.py".into(),
        content: "".into(),
    });
    assert!(out.is_error && out.text.contains("already exists"));
    let out = ws.execute(&ToolRequest::Create {
        path: "pkg/sub/new.py".into(),
        content: "w = 4\n".into(),
    });
    assert!(!out.is_error, "{}", out.text);
    let out = ws.execute(&ToolRequest::Search {
        pattern: r"^\w = [34]".into(),
        path: None,
    });
    assert_eq!(out.text, "pkg/a.py:2: z = 3\npkg/sub/new.py:1: w = 4\n");
    let out = ws.execute(&ToolRequest::Search {
        pattern: "(".into(),
        path: None,
    });
    assert!(out.is_error && out.text.contains("not a valid regular expression"));
    let out = ws.execute(&ToolRequest::List { path: None });
    assert_eq!(out.text, "README\npkg/\npkg/a.py\npkg/sub/\n");
    let out = ws.execute(&ToolRequest::View {
        path: "pkg/b.py".into(),
        start: None,
        end: None,
    });
    assert!(
        out.is_error && out.text.contains("No such file"),
        "{}",
        out.text
    );
}

#[test]
fn links_and_climbing_paths_cannot_escape() {
    let outside = tempfile::tempdir().expect("tmp");
    std::fs::write(outside.path().join("secret"), "s").expect("write");
    let (dir, mut ws) = workspace(&[("a.py", "x\n")]);
    #[cfg(unix)]
    std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).expect("symlink");
    for request in [
        ToolRequest::View {
            path: "link/secret".into(),
            start: None,
            end: None,
        },
        ToolRequest::Create {
            path: "link/new".into(),
            content: "x".into(),
        },
        ToolRequest::Create {
            path: "../escaped".into(),
            content: "x".into(),
        },
        edit("link/secret", "s", "t"),
    ] {
        let out = ws.execute(&request);
        assert!(out.is_error, "{request:?}: {}", out.text);
    }
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret")).expect("read"),
        "s"
    );
    assert!(!outside.path().join("new").exists());
    assert!(
        !dir.path()
            .parent()
            .expect("parent")
            .join("escaped")
            .exists()
    );
}

fn replace(path: Option<&str>, name: &str, source: &str) -> ToolRequest {
    ToolRequest::ReplaceFunction {
        path: path.map(str::to_string),
        name: name.into(),
        source: source.into(),
    }
}

#[test]
fn replace_function_swaps_the_whole_definition() {
    let module = "import os\n\n\ndef add(a, b):\n    \"\"\"Sum.\"\"\"\n    x = a\n\n    return x - b\n\n\ndef sub(a, b):\n    return a - b\n";
    let (dir, mut ws) = workspace(&[("pkg/m.py", module), ("README.md", "def add(x):\n")]);
    let out = ws.execute(&replace(None, "add", "def add(a, b):\n    return a + b\n"));
    assert!(!out.is_error, "{}", out.text);
    assert!(
        out.text.contains("Replaced function `add` in pkg/m.py"),
        "{}",
        out.text
    );
    let now = std::fs::read_to_string(dir.path().join("pkg/m.py")).expect("read");
    assert_eq!(
        now,
        "import os\n\n\ndef add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
    );
    // The same function again is no change; undo restores the original.
    let same = ws.execute(&replace(None, "add", "def add(a, b):\n    return a + b"));
    assert!(
        same.is_error && same.text.contains("identical"),
        "{}",
        same.text
    );
    assert!(!ws.execute(&ToolRequest::Undo).is_error);
    let back = std::fs::read_to_string(dir.path().join("pkg/m.py")).expect("read");
    assert_eq!(back, module);
}

#[test]
fn replace_function_keeps_method_indentation_and_multiline_headers() {
    let module = "class Box:\n    def put(\n        self,\n        item,\n    ):\n        self.items.append(item)\n        return None\n\n    def size(self):\n        return len(self.items)\n";
    let (dir, mut ws) = workspace(&[("box.py", module)]);
    // Written at the top level (as a model would), it lands inside the class.
    let out = ws.execute(&replace(
        Some("box.py"),
        "put",
        "def put(self, item):\n    if item is not None:\n        self.items.append(item)\n",
    ));
    assert!(!out.is_error, "{}", out.text);
    let now = std::fs::read_to_string(dir.path().join("box.py")).expect("read");
    assert_eq!(
        now,
        "class Box:\n    def put(self, item):\n        if item is not None:\n            self.items.append(item)\n\n    def size(self):\n        return len(self.items)\n"
    );
}

#[test]
fn replace_function_not_found_or_ambiguous_is_a_clear_error() {
    let (_dir, mut ws) = workspace(&[
        ("a.py", "def f():\n    return 1\n"),
        (
            "b.py",
            "def f():\n    return 2\n\n\nclass C:\n    def g(self):\n        return 1\n\n\nclass D:\n    def g(self):\n        return 2\n",
        ),
    ]);
    let missing = ws.execute(&replace(None, "nope", "def nope():\n    pass\n"));
    assert!(
        missing.is_error && missing.text.contains("no function `nope`"),
        "{}",
        missing.text
    );
    let both = ws.execute(&replace(None, "f", "def f():\n    return 3\n"));
    assert!(both.is_error, "{}", both.text);
    assert!(
        both.text.contains("a.py:1") && both.text.contains("b.py:1"),
        "{}",
        both.text
    );
    // Naming the file settles it.
    let named = ws.execute(&replace(Some("b.py"), "f", "def f():\n    return 3\n"));
    assert!(!named.is_error, "{}", named.text);
    // Two methods of one name in the named file stay ambiguous.
    let twice = ws.execute(&replace(Some("b.py"), "g", "def g(self):\n    return 0\n"));
    assert!(
        twice.is_error && twice.text.contains("2 times in b.py"),
        "{}",
        twice.text
    );
    // A path that does not define it falls back to the repository.
    let elsewhere = ws.execute(&replace(
        Some("tests/test_a.py"),
        "f",
        "def f():\n    return 4\n",
    ));
    assert!(
        elsewhere.is_error && elsewhere.text.contains("2 places"),
        "{}",
        elsewhere.text
    );
}
