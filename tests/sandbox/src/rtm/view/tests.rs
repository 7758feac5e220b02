//! Message-in / message-out tables for the view engine.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::*;

fn message(v: &Value) -> Message {
    Message::parse(&Arc::new(Stored::from_json(&v.to_string())))
}

fn view(sql: &str) -> View {
    View::parse(sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// What a simple view returns for `msg`, as JSON text (`None` = dropped).
fn simple(sql: &str, msg: &Value) -> Option<String> {
    let v = view(sql);
    assert!(!v.aggregated(), "{sql}");
    v.select(message(msg)).map(|r| r.json())
}

/// The rows of one window of aggregated view `sql` over `msgs`, as JSON values.
fn window(sql: &str, msgs: &[Value]) -> Vec<Value> {
    let v = view(sql);
    assert!(v.aggregated(), "{sql}");
    let mut active = ActiveView::new(v, DEFAULT_PERIOD, 1);
    for (seq, m) in msgs.iter().enumerate() {
        assert!(active.consume(seq as u64, message(m)).is_none(), "{sql}");
    }
    match active.close_window() {
        Some((last, rows)) => {
            assert_eq!(last, msgs.len() as u64 - 1);
            rows.iter()
                .map(|r| serde_json::from_str(&r.json()).unwrap())
                .collect()
        }
        None => Vec::new(),
    }
}

fn error(sql: &str) -> String {
    match View::parse(sql) {
        Ok(v) => panic!("{sql} parsed: {v:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn non_objects_are_dropped_by_every_view() {
    for sql in [
        "select * from ch",
        "select a from ch",
        "select * from ch where true",
    ] {
        for (msg, want) in [
            (json!("hello"), None),
            (json!(42), None),
            (json!([{"a": 1}]), None),
            (json!(null), None),
            (json!(true), None),
            (json!({}), Some("{}")),
        ] {
            let got = simple(sql, &msg);
            let want = want.map(|w| {
                if sql.contains(" a ") {
                    r#"{"a":null}"#
                } else {
                    w
                }
            });
            assert_eq!(got.as_deref(), want, "{sql} over {msg}");
        }
    }
    // Nor do they count in a window.
    assert_eq!(
        window(
            "SELECT COUNT(*) FROM `test`",
            &[
                json!({"a": 1}),
                json!("s"),
                json!({}),
                json!([1]),
                json!({"b": 2})
            ]
        ),
        [json!({"COUNT(*)": 3})]
    );
}

#[test]
fn select_star_returns_the_message_unchanged() {
    for text in [
        r#"{"test":1}"#,
        r#"{"z":1,"a":[],"m":{},"s":"","c":"Привет","f":3.1415,"b":false}"#,
    ] {
        let v = view("select * from `ch`");
        let row = v
            .select(Message::parse(&Arc::new(Stored::from_json(text))))
            .unwrap();
        assert_eq!(row.json(), text, "byte for byte, key order kept");
    }
}

#[test]
fn projections_and_column_names() {
    let msg = json!({"test": 42, "unused": 1, "who": "zebra", "group": {"group_city": "Paris"},
                     "a.b": 5, "user": {"id": 1}, "b": 3});
    let table: &[(&str, &str)] = &[
        ("select test from ch", r#"{"test":42}"#),
        ("select missing from ch", r#"{"missing":null}"#),
        ("select `who` from ch", r#"{"who":"zebra"}"#),
        (
            "select group.group_city from ch",
            r#"{"group.group_city":"Paris"}"#,
        ),
        ("select `a.b` from ch", r#"{"a.b":5}"#),
        ("select user from ch", r#"{"user":{"id":1}}"#),
        (
            "select concat(who,'-view') as name from ch",
            r#"{"name":"zebra-view"}"#,
        ),
        ("select who name from ch", r#"{"name":"zebra"}"#),
        (
            "select who as '#of animals' from ch",
            r##"{"#of animals":"zebra"}"##,
        ),
        ("select who as `the who` from ch", r#"{"the who":"zebra"}"#),
        ("select b+1 from ch", r#"{"b+1":4}"#),
        ("select  b * 2  ,test from ch", r#"{"b * 2":6,"test":42}"#),
        (
            "select test, who, b from ch",
            r#"{"test":42,"who":"zebra","b":3}"#,
        ),
        (
            "select b, who, test from ch",
            r#"{"b":3,"who":"zebra","test":42}"#,
        ),
        ("select test as x, b as x from ch", r#"{"x":3}"#),
        ("select who as count from ch", r#"{"count":"zebra"}"#),
        ("SELECT who AS w FROM ch;", r#"{"w":"zebra"}"#),
    ];
    for (sql, want) in table {
        assert_eq!(simple(sql, &msg).as_deref(), Some(*want), "{sql}");
    }
}

#[test]
fn where_keeps_only_true() {
    let table: &[(&str, Value, bool)] = &[
        ("who = 'zebra'", json!({"who": "zebra"}), true),
        ("who = \"zebra\"", json!({"who": "zebra"}), true),
        ("who = 'zebra'", json!({"who": "Zebra"}), false),
        ("test != 2", json!({"test": 2}), false),
        ("test != 2", json!({"test": 1}), true),
        ("test <> 2", json!({"test": 3}), true),
        ("test != 2", json!({"other": 1}), false),
        ("n = '5'", json!({"n": 5}), false),
        ("n = 5", json!({"n": 5.0}), true),
        ("n == 5", json!({"n": 5}), true),
        (
            "object.param >= 1 OR object.id == 0",
            json!({"object": {"param": 0, "id": 0}}),
            true,
        ),
        ("x IS NULL", json!({"y": 1}), true),
        ("x IS NULL", json!({"x": null}), true),
        ("x IS NOT NULL", json!({"x": 0}), true),
        (
            "repo.name LIKE 'satori%'",
            json!({"repo": {"name": "satori-com/chat"}}),
            true,
        ),
        ("a.b.c = 1", json!({"a": {"b": 7}}), false),
        ("a.0 = 1", json!({"a": {"0": 1}}), true),
        ("a.0 = 1", json!({"a": [1]}), false),
        ("`where` = 1", json!({"where": 1}), true),
        ("n > 2 AND n < 5", json!({"n": 3}), true),
        ("n > 2 AND n < 5", json!({"n": 5}), false),
        ("NOT n > 2", json!({"n": 1}), true),
        ("NOT n > 2", json!({}), false),
        ("NOT (n > 2 AND x = 1)", json!({"n": 1}), true),
        ("x = 1 OR n = 1", json!({"n": 1}), true),
        ("x = 1 AND n = 1", json!({"n": 1}), false),
        ("n", json!({"n": true}), true),
        ("n", json!({"n": 1}), false),
        ("s < 'b'", json!({"s": "a"}), true),
        ("s < 1", json!({"s": "a"}), false),
        ("b < true", json!({"b": false}), false),
        ("b = true", json!({"b": true}), true),
        ("o = o", json!({"o": {"k": 1}}), false),
        ("o != o", json!({"o": [1]}), true),
        ("n IN (1, 2, 3)", json!({"n": 2}), true),
        ("n IN (1, 2, 3)", json!({"n": 4}), false),
        ("n NOT IN (1, 2)", json!({"n": 4}), true),
        ("n NOT IN (1, null)", json!({"n": 4}), false),
        ("n IN (1, null)", json!({"n": 1}), true),
        ("n BETWEEN 1 AND 3", json!({"n": 3}), true),
        ("n BETWEEN 1 AND 3", json!({"n": 4}), false),
        ("n NOT BETWEEN 1 AND 3", json!({"n": 4}), true),
        ("n + 1 = 3 * 1", json!({"n": 2}), true),
        ("-n = -2", json!({"n": 2}), true),
        ("n % 2 = 1", json!({"n": 7}), true),
        ("n / 0 IS NULL", json!({"n": 7}), true),
        ("s + 1 IS NULL", json!({"s": "1"}), true),
        ("lower(s) = 'abc'", json!({"s": "AbC"}), true),
        ("length(s) = 3", json!({"s": "été"}), true),
        ("coalesce(x, y, 1) = 2", json!({"y": 2}), true),
        ("abs(n) = 3", json!({"n": -3}), true),
        ("TRUE", json!({}), true),
        ("null", json!({}), false),
    ];
    for (cond, msg, kept) in table {
        let sql = format!("select * from ch where {cond}");
        assert_eq!(simple(&sql, msg).is_some(), *kept, "{cond} over {msg}");
    }
}

#[test]
fn expression_values() {
    let msg = json!({"i": 7, "f": 2.5, "s": "Zebra", "big": i64::MAX, "b": true, "a": [1], "o": {"k": 1}});
    let table: &[(&str, Value)] = &[
        ("i + 1", json!(8)),
        ("i - 10", json!(-3)),
        ("i * 2", json!(14)),
        ("i / 2", json!(3.5)),
        ("4 / 2", json!(2.0)),
        ("i % 4", json!(3)),
        ("i % 0", json!(null)),
        ("i / 0", json!(null)),
        ("f * 2", json!(5.0)),
        ("big + 1", json!(9.223_372_036_854_776e18)),
        ("-i", json!(-7)),
        ("- -i", json!(7)),
        ("1 + 2 * 3", json!(7)),
        ("(1 + 2) * 3", json!(9)),
        ("2e3", json!(2000.0)),
        (".5", json!(0.5)),
        ("-7", json!(-7)),
        ("s + 1", json!(null)),
        (
            "concat(s, '-', i, '-', f, '-', b)",
            json!("Zebra-7-2.5-true"),
        ),
        ("concat(s, missing)", json!(null)),
        ("concat(s, a)", json!(null)),
        ("CONCAT(s)", json!("Zebra")),
        ("upper(s)", json!("ZEBRA")),
        ("lower(i)", json!(null)),
        ("length(s)", json!(5)),
        ("abs(-2.5)", json!(2.5)),
        ("abs(s)", json!(null)),
        ("coalesce(missing, null, s)", json!("Zebra")),
        ("coalesce(missing)", json!(null)),
        ("s LIKE 'Z%'", json!(true)),
        ("s LIKE 'z%'", json!(false)),
        ("s LIKE '%br%'", json!(true)),
        ("s LIKE 'Z_bra'", json!(true)),
        ("s LIKE 'Z_bra_'", json!(false)),
        ("s LIKE 'Zeb'", json!(false)),
        ("s LIKE '%'", json!(true)),
        ("s NOT LIKE '%a'", json!(false)),
        ("'50%' LIKE '50\\%'", json!(true)),
        ("'500' LIKE '50\\%'", json!(false)),
        ("'a_c' LIKE 'a\\_c'", json!(true)),
        ("'abc' LIKE 'a\\_c'", json!(false)),
        ("'aXbXc' LIKE '%b%c'", json!(true)),
        ("'mississippi' LIKE '%iss%ppi'", json!(true)),
        ("i LIKE '7'", json!(null)),
        ("s = 'Zebra' AND missing = 1", json!(null)),
        ("s = 'x' AND missing = 1", json!(false)),
        ("s = 'Zebra' OR missing = 1", json!(true)),
        ("missing = 1 OR false", json!(null)),
        ("NOT missing", json!(null)),
        ("b AND i", json!(null)),
        ("'it''s'", json!("it's")),
        ("\"say \\\"hi\\\"\"", json!("say \"hi\"")),
        ("o", json!({"k": 1})),
        ("o.k", json!(1)),
        ("a.k", json!(null)),
        ("TRUE", json!(true)),
        ("NULL", json!(null)),
        ("1 = 1.0", json!(true)),
        ("'10' = 10", json!(false)),
        ("'10' < 10", json!(null)),
        ("i BETWEEN 1 AND missing", json!(null)),
        ("i BETWEEN 8 AND missing", json!(false)),
    ];
    for (expr, want) in table {
        let sql = format!("select {expr} as v from ch");
        let got: Value = serde_json::from_str(&simple(&sql, &msg).unwrap()).unwrap();
        assert_eq!(got["v"], *want, "{expr}");
        if want.is_f64() {
            assert!(got["v"].is_f64(), "{expr} must stay a float");
        }
    }
}

#[test]
fn keywords_are_case_insensitive_names_are_not() {
    let msg = json!({"Who": "a", "who": "b"});
    for sql in [
        "select who from ch where who = 'b'",
        "SELECT who FROM ch WHERE who = 'b'",
        "SeLeCt who fRoM ch wHeRe who = 'b'",
    ] {
        assert_eq!(
            simple(sql, &msg).as_deref(),
            Some(r#"{"who":"b"}"#),
            "{sql}"
        );
    }
    assert_eq!(
        simple("select Who from ch", &msg).as_deref(),
        Some(r#"{"Who":"a"}"#)
    );
    assert_eq!(view("select * from Chan").channel(), "Chan");
    for (sql, channel) in [
        ("select * from test-channel", "test-channel"),
        ("select * from filter_test_1a2b", "filter_test_1a2b"),
        ("select * from example.in where a = 1", "example.in"),
        ("select * from `Meetup-RSVP`", "Meetup-RSVP"),
        ("select * from `my chan`;", "my chan"),
        ("select * from my-chan;", "my-chan"),
    ] {
        assert_eq!(view(sql).channel(), channel, "{sql}");
    }
}

#[test]
fn classification() {
    for (sql, aggregated) in [
        ("select * from animals where who = 'zebra'", false),
        ("select test from ch", false),
        ("select concat(who,'-view') as name from ch", false),
        ("SELECT COUNT(*) FROM test", true),
        ("select count(*) as count from animals group by who", true),
        ("SELECT a, MAX(b) FROM mychannel GROUP BY a", true),
        ("select who from animals group by who", true),
        ("select * from ch having true", true),
        ("select concat(who, count(*)) from ch", true),
    ] {
        assert_eq!(view(sql).aggregated(), aggregated, "{sql}");
    }
}

#[test]
fn aggregates_over_a_window() {
    let animals = [
        json!({"who": "zebra", "where": [34.1, -118.2]}),
        json!({"who": "giraffe", "where": [35.0, -117.0]}),
        json!({"who": "zebra", "where": [34.2, -118.1]}),
        json!("not an object"),
    ];
    let b = [
        json!({"a": 1, "b": 2}),
        json!({"a": 1, "b": 7}),
        json!({"a": 2, "b": 5}),
        json!({"a": 1}),
    ];
    let nums = [
        json!({"n": 1}),
        json!({"n": 2.5}),
        json!({"n": "x"}),
        json!({"n": null}),
        json!({"m": 1}),
        json!({"n": 1.0}),
        json!({"n": true}),
    ];
    let table: &[(&str, &[Value], Vec<Value>)] = &[
        (
            "SELECT count(*) as count, who FROM `animals` GROUP BY who",
            &animals,
            vec![json!({"count": 2, "who": "zebra"}), json!({"count": 1, "who": "giraffe"})],
        ),
        (
            "select count(*) as count from `animals` group by who",
            &animals[..3],
            vec![json!({"count": 2}), json!({"count": 1})],
        ),
        ("SELECT COUNT(*) FROM `test`", &animals, vec![json!({"COUNT(*)": 3})]),
        ("select count(*) from t", &animals, vec![json!({"count(*)": 3})]),
        (
            "SELECT a, MAX(b) FROM mychannel GROUP BY a",
            &b,
            vec![json!({"a": 1, "MAX(b)": 7}), json!({"a": 2, "MAX(b)": 5})],
        ),
        (
            "select min(b) as lo, sum(b) as s, avg(b) as m, count(b) as c from ch",
            &b,
            vec![json!({"lo": 2, "s": 14, "m": 14.0 / 3.0, "c": 3})],
        ),
        (
            "select count(n) as c, count(distinct n) as d, sum(n) as s, avg(n) as a, min(n) as lo, max(n) as hi from ch",
            &nums,
            vec![json!({"c": 5, "d": 4, "s": 4.5, "a": 1.5, "lo": 1, "hi": "x"})],
        ),
        ("select avg(n) as a from ch", &[json!({"n": 2}), json!({"n": 4})], vec![json!({"a": 3.0})]),
        ("select sum(n) as s from ch", &[json!({"n": 2}), json!({"n": 4})], vec![json!({"s": 6})]),
        ("select sum(n) as s, avg(n) as a, min(n) as m from ch", &[json!({"x": 2})], vec![json!({"s": null, "a": null, "m": null})]),
        (
            "SELECT MERGE(*) AS m FROM ch",
            &[json!({"x": 1, "y": 1}), json!({"y": 2})],
            vec![json!({"m": {"x": 1, "y": 2}})],
        ),
        (
            "select * from ch group by k",
            &[json!({"k": 1, "v": 1}), json!({"k": 2, "v": 2}), json!({"k": 1, "v": 3})],
            vec![json!({"k": 1, "v": 3}), json!({"k": 2, "v": 2})],
        ),
        (
            "select group.group_city as city, group.group_country, count(*) as n from ch group by city",
            &[
                json!({"group": {"group_city": "Paris", "group_country": "fr"}}),
                json!({"group": {"group_city": "Lyon", "group_country": "fr"}}),
                json!({"group": {"group_city": "Paris", "group_country": "FR"}}),
            ],
            vec![
                json!({"city": "Paris", "group.group_country": "FR", "n": 2}),
                json!({"city": "Lyon", "group.group_country": "fr", "n": 1}),
            ],
        ),
        (
            "select who, count(*) as n from ch group by who having n > 1",
            &animals,
            vec![json!({"who": "zebra", "n": 2})],
        ),
        (
            "select who from ch group by who having count(*) > 1",
            &animals,
            vec![json!({"who": "zebra"})],
        ),
        ("select who from ch group by who having who = 'giraffe'", &animals, vec![json!({"who": "giraffe"})]),
        ("select count(*) as n from ch having n > 5", &animals, vec![]),
        ("select count(*) as n from ch where who = 'lion'", &animals, vec![]),
        ("select count(*) as n from ch where who = 'zebra'", &animals, vec![json!({"n": 2})]),
        (
            "select concat(who, '=', count(*)) as s from ch group by who",
            &animals,
            vec![json!({"s": "zebra=2"}), json!({"s": "giraffe=1"})],
        ),
        (
            "select k, count(*) as n from ch group by k",
            &[json!({"k": 1}), json!({"k": 1.0}), json!({"k": "1"}), json!({}), json!({"k": null})],
            vec![json!({"k": 1.0, "n": 2}), json!({"k": "1", "n": 1}), json!({"k": null, "n": 2})],
        ),
        (
            "select a, b, count(*) as n from ch group by a, b",
            &[json!({"a": 1, "b": 1}), json!({"a": 1, "b": 2}), json!({"a": 1, "b": 1})],
            vec![json!({"a": 1, "b": 1, "n": 2}), json!({"a": 1, "b": 2, "n": 1})],
        ),
        ("select count(distinct o) as d from ch", &[json!({"o": {"x": 1, "y": [1]}}), json!({"o": {"y": [1], "x": 1.0}})], vec![json!({"d": 1})]),
    ];
    for (sql, msgs, want) in table {
        assert_eq!(&window(sql, msgs), want, "{sql}");
    }
}

#[test]
fn windows_are_independent_and_empty_ones_send_nothing() {
    let mut v = ActiveView::new(view("select count(*) as n from ch"), DEFAULT_PERIOD, 7);
    assert_eq!(v.windowing(), Some((7, DEFAULT_PERIOD)));
    assert!(v.close_window().is_none(), "nothing consumed");
    v.consume(0, message(&json!({})));
    v.consume(1, message(&json!({})));
    let (last, rows) = v.close_window().unwrap();
    assert_eq!((last, rows[0].json()), (1, r#"{"n":2}"#.to_owned()));
    assert!(v.close_window().is_none(), "the next window starts empty");
    v.consume(2, message(&json!("not an object")));
    assert!(
        v.close_window().is_none(),
        "consumed but no rows: nothing to send"
    );
    v.consume(3, message(&json!({})));
    v.consume(4, message(&json!(5)));
    let (last, rows) = v.close_window().unwrap();
    assert_eq!(
        (last, rows[0].json()),
        (4, r#"{"n":1}"#.to_owned()),
        "position after the last consumed"
    );
    // A simple view has no windows.
    let mut s = ActiveView::new(
        view("select a from ch where a > 1"),
        Duration::from_secs(5),
        8,
    );
    assert_eq!(s.windowing(), None);
    assert!(s.consume(0, message(&json!({"a": 1}))).is_none());
    let (seq, rows) = s.consume(1, message(&json!({"a": 2}))).unwrap();
    assert_eq!((seq, rows[0].json()), (1, r#"{"a":2}"#.to_owned()));
    assert!(s.close_window().is_none());
}

#[test]
fn errors_tell_syntax_from_unsupported() {
    let table: &[(&str, &str)] = &[
        ("wrong_filter", "Invalid filter: expected SELECT"),
        ("", "Invalid filter: expected SELECT"),
        ("select", "Invalid filter: expected an expression, found the end of the query"),
        ("select *", "Invalid filter: expected FROM, found the end of the query"),
        ("select * from", "Invalid filter: expected a channel name after FROM"),
        ("select a, from ch", "Invalid filter: unexpected 'from' (quote field names that are keywords with backticks)"),
        ("select 'open from ch", "Invalid filter: unterminated quoted string"),
        ("select `open from ch", "Invalid filter: unterminated quoted identifier"),
        ("select * from ch where", "Invalid filter: expected an expression, found the end of the query"),
        ("select * from ch where a = ", "Invalid filter: expected an expression, found the end of the query"),
        ("select * from ch where (a = 1", "Invalid filter: expected ')', found the end of the query"),
        ("select * from ch group a", "Invalid filter: expected BY, found 'a'"),
        ("select * from ch where a is 1", "Invalid filter: expected NULL, found a number"),
        ("select * from ch x", "Invalid filter: expected the end of the query, found 'x'"),
        ("select * from ch;;", "Invalid filter: expected the end of the query, found a symbol"),
        ("select a # b from ch", "Invalid filter: unexpected character '#'"),
        ("select a.+ from ch", "Invalid filter: expected a field name after '.', found a symbol"),
        ("select * from ch where where = 1", "Invalid filter: unexpected 'where' (quote field names that are keywords with backticks)"),
        ("insert into ch values (1)", "Invalid filter: INSERT is not supported"),
        ("DELETE FROM ch", "Invalid filter: DELETE is not supported"),
        ("select distinct a from ch", "Invalid filter: SELECT DISTINCT is not supported"),
        ("select * from ch order by a", "Invalid filter: ORDER BY is not supported"),
        ("select * from ch limit 1", "Invalid filter: LIMIT is not supported"),
        ("select * from a join b", "Invalid filter: JOIN is not supported"),
        ("select * from a inner join b", "Invalid filter: JOIN is not supported"),
        ("select * from a, b", "Invalid filter: more than one channel in FROM is not supported"),
        ("select * from (select * from a)", "Invalid filter: a sub-query is not supported"),
        ("select * from a where x in (select y from b)", "Invalid filter: a sub-query is not supported"),
        ("select * from a union select * from b", "Invalid filter: UNION is not supported"),
        ("select first(a) from ch", "Invalid filter: the function first is not supported"),
        ("select now() from ch", "Invalid filter: the function now is not supported"),
        ("select * from ch where count(*) > 1", "Invalid filter: an aggregate function in WHERE is not supported"),
        ("select count(*) from ch group by count(*)", "Invalid filter: an aggregate function in GROUP BY is not supported"),
        ("select count(*) as n from ch group by n", "Invalid filter: an aggregate function in GROUP BY is not supported"),
        ("select max(count(*)) from ch", "Invalid filter: a nested aggregate function is not supported"),
        ("select concat() from ch", "Invalid filter: CONCAT with 0 arguments is not supported"),
        ("select lower(a, b) from ch", "Invalid filter: LOWER with 2 arguments is not supported"),
        ("select sum(a, b) from ch", "Invalid filter: SUM with several arguments is not supported"),
        ("select sum() from ch", "Invalid filter: SUM with 0 arguments is not supported"),
        ("select sum(*) from ch", "Invalid filter: SUM(*) is not supported"),
        ("select merge(a) from ch", "Invalid filter: MERGE of an expression is not supported"),
        ("select sum(distinct a) from ch", "Invalid filter: DISTINCT in SUM is not supported"),
        ("select count(*) over () from ch", "Invalid filter: OVER is not supported"),
        ("select case when a then 1 end from ch", "Invalid filter: CASE is not supported"),
        ("select * from ch where a like 'x' escape '!'", "Invalid filter: LIKE … ESCAPE is not supported"),
    ];
    for (sql, want) in table {
        assert_eq!(error(sql), *want, "{sql}");
    }
}

#[test]
fn queries_are_bounded() {
    // Length.
    let long = format!(
        "select * from ch where a = '{}'",
        "x".repeat(MAX_QUERY_BYTES)
    );
    assert_eq!(
        error(&long),
        format!("Invalid filter: the query is longer than {MAX_QUERY_BYTES} bytes")
    );
    let deep = format!("Invalid filter: expressions nest deeper than {MAX_DEPTH} levels");
    // Nesting, through parentheses, NOT, signs, function calls and operator chains.
    let n = MAX_DEPTH + 1;
    for sql in [
        format!("select {}a{} from ch", "(".repeat(n), ")".repeat(n)),
        format!("select * from ch where {} a", "NOT ".repeat(n)),
        format!("select {}a from ch", "- ".repeat(n)),
        format!("select {}a{} from ch", "abs(".repeat(n), ")".repeat(n)),
        format!("select a{} from ch", " + a".repeat(n)),
        format!("select * from ch where a{}", " and a".repeat(n)),
        format!("select {}a", "(".repeat(MAX_QUERY_BYTES - 10)),
    ] {
        assert_eq!(error(&sql), deep, "{}", &sql[..40]);
    }
    // Just within the limit is fine.
    let ok = format!(
        "select {}a{} as v from ch",
        "(".repeat(MAX_DEPTH - 2),
        ")".repeat(MAX_DEPTH - 2)
    );
    assert_eq!(simple(&ok, &json!({"a": 1})).as_deref(), Some(r#"{"v":1}"#));
}

#[test]
fn evaluation_is_metered() {
    // A query that multiplies a big string: the result is null, not gigabytes.
    let big = "x".repeat(1 << 20);
    let args = vec!["s"; 100].join(",");
    let sql = format!("select concat({args}) as v, length(s) as n from ch");
    let out = simple(&sql, &json!({"s": big})).unwrap();
    let out: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(out["v"], Value::Null, "over the fuel");
    // A pathological LIKE over a long string gives up (null, so WHERE drops it).
    let text = "a".repeat(1 << 16);
    let pattern = format!("%{}b%", "a".repeat(2000));
    let sql = "select * from ch where s like p";
    assert_eq!(simple(sql, &json!({"s": text, "p": pattern})), None);
    let sql = "select s like p as v from ch";
    let out: Value =
        serde_json::from_str(&simple(sql, &json!({"s": text, "p": pattern})).unwrap()).unwrap();
    assert_eq!(out["v"], Value::Null);
}

#[test]
fn windows_close_early_at_their_bounds() {
    // Groups.
    let mut v = ActiveView::new(
        view("select k, count(*) as n from ch group by k"),
        DEFAULT_PERIOD,
        1,
    );
    for k in 0..MAX_GROUPS - 1 {
        assert!(v.consume(k as u64, message(&json!({"k": k}))).is_none());
    }
    let (last, rows) = v
        .consume(5000, message(&json!({"k": "last"})))
        .expect("full");
    assert_eq!((last, rows.len()), (5000, MAX_GROUPS));
    assert!(v.close_window().is_none(), "a fresh window");
    // Bytes.
    let mut v = ActiveView::new(view("select count(*) as n from ch"), DEFAULT_PERIOD, 1);
    let msg = json!({"pad": "p".repeat(64 * 1024)});
    let per_window = MAX_WINDOW_BYTES.div_ceil(msg.to_string().len());
    let mut emitted = Vec::new();
    for seq in 0..per_window * 2 + 1 {
        if let Some((_, rows)) = v.consume(seq as u64, message(&msg)) {
            emitted.push(rows[0].json());
        }
    }
    let n = format!(r#"{{"n":{per_window}}}"#);
    assert_eq!(emitted, [n.clone(), n]);
    assert_eq!(v.close_window().unwrap().1[0].json(), r#"{"n":1}"#);
}
