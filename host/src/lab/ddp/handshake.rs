//! What the ranks say to each other at the TCP rendezvous ([`crate::lab::ddp::rendezvous`]
//! moves the lines): a rank's greeting, rank 0's judgement of it, the refusals and their words
//! on the wire, the strangers rank 0 turned away, and the error lines that name them.
//!
//! A greeting is one line, `streamlab-rendezvous 1 world=4 rank=2 token=<run token>`, with
//! nothing after `token=` when the rank has no token. Rank 0 answers `id <256 hex digits>`
//! to a greeting with its own world size and run token from a rank it has not answered yet,
//! and `refused <why>` to any other line, `why` being one of `garbled`, `wrong-token`,
//! `no-token`, `unexpected-token`, `world=<rank 0's world size>` or `answered`. Error lines
//! say where a run token came from, never the token.
use crate::lab::ddp::ranks::{RankEnv, RunToken, TOKEN_VAR};
use crate::runtime::nccl::UniqueId;
use crate::runtime::{Error, Result};
use crate::t;
use crate::text::Text;

/// The greeting's first word, and the version of this exchange.
const HELLO: &str = "streamlab-rendezvous";
const VERSION: &str = "1";

/// What a rank says when it connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Greeting {
    pub world: usize,
    pub rank: usize,
    pub token: Option<String>,
}

impl Greeting {
    pub(super) fn of(env: &RankEnv) -> Greeting {
        let token = env.token.as_ref().map(|t| t.value().to_string());
        Greeting { world: env.world, rank: env.rank, token }
    }

    pub(super) fn line(&self) -> String {
        let token = self.token.as_deref().unwrap_or("");
        format!("{HELLO} {VERSION} world={} rank={} token={token}\n", self.world, self.rank)
    }

    /// The greeting in `line`, None when it is not one.
    pub(super) fn parse(line: &str) -> Option<Greeting> {
        let fields: Vec<&str> = line.trim_end_matches(['\r', '\n']).split(' ').collect();
        let [hello, version, world, rank, token] = fields[..] else { return None };
        if hello != HELLO || version != VERSION {
            return None;
        }
        let world: usize = world.strip_prefix("world=")?.parse().ok()?;
        let rank: usize = rank.strip_prefix("rank=")?.parse().ok()?;
        let token = token.strip_prefix("token=")?;
        if rank >= world || !(token.is_empty() || RunToken::valid(token)) {
            return None;
        }
        Some(Greeting { world, rank, token: (!token.is_empty()).then(|| token.to_string()) })
    }
}

/// Why rank 0 turned a connection away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// No line within [`super::rendezvous::GREETING_WITHIN`], or closed before sending one.
    Silent,
    /// A line that is not a greeting, or one longer than [`super::rendezvous::LINE_CAP`].
    Garbled,
    /// Rank 0 has a run token and the greeting another.
    WrongToken,
    /// Rank 0 has a run token and the greeting none.
    NoToken,
    /// The greeting has a run token and rank 0 none.
    UnexpectedToken,
    /// Another world size than rank 0's, which it holds.
    World(usize),
    /// A rank that rank 0 has answered already (or rank 0 itself).
    Answered,
}

impl Refusal {
    /// The word rank 0 sends after `refused ` (never sent for a silent connection).
    pub(super) fn word(self) -> String {
        match self {
            Refusal::Silent => "silent".into(),
            Refusal::Garbled => "garbled".into(),
            Refusal::WrongToken => "wrong-token".into(),
            Refusal::NoToken => "no-token".into(),
            Refusal::UnexpectedToken => "unexpected-token".into(),
            Refusal::World(world) => format!("world={world}"),
            Refusal::Answered => "answered".into(),
        }
    }

    pub(super) fn from_word(word: &str) -> Option<Refusal> {
        Some(match word {
            "garbled" => Refusal::Garbled,
            "wrong-token" => Refusal::WrongToken,
            "no-token" => Refusal::NoToken,
            "unexpected-token" => Refusal::UnexpectedToken,
            "answered" => Refusal::Answered,
            _ => Refusal::World(word.strip_prefix("world=")?.parse().ok()?),
        })
    }
}

/// The connections rank 0 turned away, by kind.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Strangers {
    pub silent: usize,
    pub garbled: usize,
    /// A wrong run token, a token where rank 0 has none, or none where it has one.
    pub token: usize,
    pub world: usize,
    /// A rank answered already.
    pub answered: usize,
}

impl Strangers {
    pub(super) fn note(&mut self, why: Refusal) {
        match why {
            Refusal::Silent => self.silent += 1,
            Refusal::Garbled => self.garbled += 1,
            Refusal::WrongToken | Refusal::NoToken | Refusal::UnexpectedToken => self.token += 1,
            Refusal::World(_) => self.world += 1,
            Refusal::Answered => self.answered += 1,
        }
    }

    pub fn total(&self) -> usize {
        self.silent + self.garbled + self.token + self.world + self.answered
    }

    /// `turned away 3 strangers: 1 silent, 1 garbled, 1 with a wrong run token`.
    pub(super) fn said(&self) -> Text {
        let kinds = [
            (self.silent, "error.ddp.strangers_silent"),
            (self.garbled, "error.ddp.strangers_garbled"),
            (self.token, "error.ddp.strangers_token"),
            (self.world, "error.ddp.strangers_world"),
            (self.answered, "error.ddp.strangers_answered"),
        ];
        let kinds = Text::List(
            kinds
                .iter()
                .filter(|(n, _)| *n > 0)
                .map(|&(n, key)| Text::message(key, vec![("n", n.into())]))
                .collect(),
        );
        match self.total() {
            1 => t!("error.ddp.turned_away_one", kinds),
            total => t!("error.ddp.turned_away", total, kinds),
        }
    }
}

/// The rank a greeting line comes from, if rank 0 answers it.
pub(super) fn judge(
    env: &RankEnv,
    waiting: &[usize],
    line: &str,
) -> std::result::Result<usize, Refusal> {
    let greeting = Greeting::parse(line).ok_or(Refusal::Garbled)?;
    match (env.token.as_ref().map(RunToken::value), greeting.token.as_deref()) {
        (Some(mine), Some(theirs)) if mine != theirs => return Err(Refusal::WrongToken),
        (Some(_), None) => return Err(Refusal::NoToken),
        (None, Some(_)) => return Err(Refusal::UnexpectedToken),
        _ => {}
    }
    if greeting.world != env.world {
        return Err(Refusal::World(env.world));
    }
    if !waiting.contains(&greeting.rank) {
        return Err(Refusal::Answered);
    }
    Ok(greeting.rank)
}

/// `1, 3-5, 9`: rank numbers in ascending order, runs of three or more as ranges.
fn ranges(ranks: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i;
        while j + 1 < ranks.len() && ranks[j + 1] == ranks[j] + 1 {
            j += 1;
        }
        match j - i {
            0 => parts.push(ranks[i].to_string()),
            1 => parts.extend([ranks[i].to_string(), ranks[j].to_string()]),
            _ => parts.push(format!("{}-{}", ranks[i], ranks[j])),
        }
        i = j + 1;
    }
    parts.join(", ")
}

/// `rank 2 of 4 (Slurm)`.
pub(super) fn who(env: &RankEnv) -> Text {
    t!("error.ddp.who", rank = env.rank, world = env.world, source = env.source.to_string())
}

/// `rank 3` or `ranks 1, 3-5`.
pub(super) fn ranks_named(ranks: &[usize]) -> Text {
    let list = ranges(ranks);
    match ranks.len() {
        1 => t!("error.ddp.rank_list_one", list),
        _ => t!("error.ddp.rank_list", list),
    }
}

/// A wait in seconds, as an error line says it (`120`, `0.5`).
pub(super) fn seconds(wait: std::time::Duration) -> String {
    wait.as_secs_f64().to_string()
}

pub(super) fn rank_0_gave_up(
    env: &RankEnv,
    addr: &str,
    waiting: &[usize],
    strangers: &Strangers,
) -> Error {
    let (who, s, addr, ranks) =
        (who(env), seconds(env.timeout), addr.to_string(), ranks_named(waiting));
    Error::NotRun(match strangers.total() {
        0 => t!("error.ddp.rank_0_gave_up", who, s, addr, ranks),
        _ => {
            t!("error.ddp.rank_0_gave_up_strangers", who, s, addr, ranks, turned = strangers.said())
        }
    })
}

/// At most `n` characters of what a peer said, for an error line.
fn clip(text: &str, n: usize) -> String {
    text.chars().take(n).collect()
}

/// What a refusal means, and what to do about it.
fn why_refused(env: &RankEnv, word: &str) -> Text {
    let same = t!("error.ddp.same_token", var = TOKEN_VAR.to_string());
    let from = match &env.token {
        Some(token) => Text::Plain(token.from.to_string()),
        None => t!("error.ddp.token_from_nowhere"),
    };
    let (rank, mine) = (env.rank, env.world);
    match Refusal::from_word(word) {
        Some(Refusal::WrongToken) => t!("error.ddp.refused_wrong_token", from, same),
        Some(Refusal::NoToken) => t!("error.ddp.refused_no_token", same),
        Some(Refusal::UnexpectedToken) => t!("error.ddp.refused_unexpected_token", from, same),
        Some(Refusal::World(world)) => t!("error.ddp.refused_world", world, mine),
        Some(Refusal::Answered) if env.token.is_some() => {
            t!("error.ddp.refused_answered_same_run", rank)
        }
        Some(Refusal::Answered) => t!("error.ddp.refused_answered", rank, same),
        Some(Refusal::Garbled) => t!("error.ddp.refused_garbled"),
        Some(Refusal::Silent) | None => Text::Plain(format!("{:?}", clip(word, 40))),
    }
}

/// The id in rank 0's answer, or the error its refusal (or a stranger's answer) makes.
pub(super) fn answer(env: &RankEnv, addr: &str, line: &str) -> Result<UniqueId> {
    let line = line.trim_end_matches(['\r', '\n']);
    let (who, addr) = (who(env), addr.to_string());
    if let Some(hex) = line.strip_prefix("id ") {
        return UniqueId::from_hex(hex)
            .map_err(|_| Error::NotRun(t!("error.ddp.damaged_id", who, addr)));
    }
    if let Some(word) = line.strip_prefix("refused ") {
        let why = why_refused(env, word);
        return Err(Error::NotRun(t!("error.ddp.refused", who, addr, why)));
    }
    let said = format!("{:?}", clip(line, 40));
    Err(Error::NotRun(t!("error.ddp.not_rank_0", who, addr, said)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::ddp::ranks::{Rendezvous, DEFAULT_TIMEOUT};

    /// Rank `rank` of `world` at 10.0.0.1:29501, with `token` from its variable.
    fn at(rank: usize, world: usize, token: Option<&str>) -> RankEnv {
        RankEnv {
            rank,
            world,
            local_rank: None,
            source: "torchrun/launch",
            rendezvous: Rendezvous::Tcp("10.0.0.1:29501".into()),
            timeout: DEFAULT_TIMEOUT,
            token: token.map(|t| RunToken::new(t, TOKEN_VAR).unwrap()),
        }
    }

    #[test]
    fn a_greeting_is_one_line_of_words_read_back_as_it_was_written() {
        let line = Greeting::of(&at(2, 4, Some("t0k"))).line();
        assert_eq!(line, "streamlab-rendezvous 1 world=4 rank=2 token=t0k\n");
        let back = Greeting::parse(&line).unwrap();
        assert_eq!(back, Greeting { world: 4, rank: 2, token: Some("t0k".into()) });
        let none = Greeting::of(&at(1, 2, None)).line();
        assert_eq!(none, "streamlab-rendezvous 1 world=2 rank=1 token=\n");
        assert_eq!(Greeting::parse(&none).unwrap().token, None);
        let long = format!("streamlab-rendezvous 1 world=2 rank=1 token={}", "x".repeat(257));
        for garbage in [
            "",
            "GET / HTTP/1.1",
            "streamlab-rendezvous 2 world=2 rank=1 token=",
            "streamlab-rendezvous 1 world=2 rank=2 token=",
            "streamlab-rendezvous 1 world=2 rank=-1 token=",
            "streamlab-rendezvous 1 world=two rank=1 token=",
            "streamlab-rendezvous 1 rank=1 world=2 token=",
            "streamlab-rendezvous 1 world=2 rank=1",
            "streamlab-rendezvous 1 world=2 rank=1 token=a b",
            "streamlab-rendezvous  1 world=2 rank=1 token=",
            &long,
        ] {
            assert_eq!(Greeting::parse(garbage), None, "{garbage:?}");
        }
    }

    #[test]
    fn rank_0_answers_only_its_own_world_and_token_once_per_rank() {
        let greet = |rank, world, token| Greeting { world, rank, token }.line();
        let rank_0 = at(0, 4, Some("alpha"));
        let waiting = [2, 3];
        let alpha = || Some("alpha".to_string());
        assert_eq!(judge(&rank_0, &waiting, &greet(3, 4, alpha())), Ok(3));
        for (line, refusal) in [
            (greet(3, 4, Some("beta".into())), Refusal::WrongToken),
            (greet(3, 4, None), Refusal::NoToken),
            (greet(3, 8, alpha()), Refusal::World(4)),
            (greet(1, 4, alpha()), Refusal::Answered),
            (greet(0, 4, alpha()), Refusal::Answered),
            ("hello, rank 0".into(), Refusal::Garbled),
        ] {
            assert_eq!(judge(&rank_0, &waiting, &line), Err(refusal), "{line:?}");
        }
        let no_token = at(0, 4, None);
        assert_eq!(judge(&no_token, &waiting, &greet(2, 4, None)), Ok(2));
        assert_eq!(
            judge(&no_token, &waiting, &greet(2, 4, alpha())),
            Err(Refusal::UnexpectedToken)
        );
        // Each word on the wire reads back as the refusal it came from.
        for refusal in [
            Refusal::Garbled,
            Refusal::WrongToken,
            Refusal::NoToken,
            Refusal::UnexpectedToken,
            Refusal::World(12),
            Refusal::Answered,
        ] {
            assert_eq!(Refusal::from_word(&refusal.word()), Some(refusal));
        }
        assert_eq!(Refusal::from_word("silent"), None);
    }

    #[test]
    fn the_strangers_and_the_ranks_waited_for_are_said_in_few_words() {
        let mut strangers = Strangers::default();
        assert_eq!(strangers.total(), 0);
        strangers.note(Refusal::Answered);
        assert_eq!(strangers.said().en(), "turned away 1 stranger: 1 for a rank answered already");
        for why in [Refusal::Silent, Refusal::Garbled, Refusal::Garbled, Refusal::NoToken] {
            strangers.note(why);
        }
        strangers.note(Refusal::World(2));
        assert_eq!(
            strangers.said().en(),
            "turned away 6 strangers: 1 silent, 2 garbled, 1 with a wrong run token, 1 with another world size, 1 for a rank answered already"
        );
        assert_eq!(ranges(&[7]), "7");
        assert_eq!(ranges(&[2, 3]), "2, 3");
        assert_eq!(ranges(&[1, 3, 4, 5, 9, 10]), "1, 3-5, 9, 10");
    }

    #[test]
    fn a_rank_reads_the_id_or_a_refusal_that_says_what_to_do_without_the_token() {
        let addr = "10.0.0.1:29501";
        let hex = "5c".repeat(128);
        let id = answer(&at(2, 4, Some("s3cret")), addr, &format!("id {hex}\n")).unwrap();
        assert!(id == UniqueId::from_hex(&hex).unwrap());
        let refused = |rank: &RankEnv, line: &str| {
            let Err(e) = answer(rank, addr, line) else { panic!("an id from {line:?}") };
            assert_eq!(e.exit_code(), 3, "{e}");
            let e = e.to_string();
            assert!(!e.contains("s3cret"), "{e}");
            e
        };
        let set = "set STREAMLAB_RENDEZVOUS_TOKEN to the same value on every rank";
        let with = at(2, 4, Some("s3cret"));
        assert_eq!(
            refused(&with, "refused wrong-token\n"),
            format!("rank 2 of 4 (torchrun/launch): rank 0 at 10.0.0.1:29501 refused the greeting: wrong run token (this rank's is from STREAMLAB_RENDEZVOUS_TOKEN; {set})")
        );
        assert!(refused(&at(2, 4, None), "refused no-token").ends_with(&format!(
            "refused the greeting: rank 0 has a run token and this rank none ({set})"
        )));
        assert!(refused(&with, "refused unexpected-token").ends_with(&format!(
            "refused the greeting: this rank has a run token (from STREAMLAB_RENDEZVOUS_TOKEN) and rank 0 none ({set})"
        )));
        assert!(refused(&with, "refused world=8").ends_with(
            "refused the greeting: rank 0's world size is 8, this rank's 4 (it must be the same on every rank)"
        ));
        assert!(refused(&with, "refused answered")
            .ends_with("two processes of this run say they are rank 2"));
        assert!(refused(&at(2, 4, None), "refused answered").contains(set));
        assert_eq!(
            refused(&with, "HTTP/1.0 400 Bad Request\r\n"),
            "rank 2 of 4 (torchrun/launch): what answers at 10.0.0.1:29501 is not a streamlab rank 0 (it said \"HTTP/1.0 400 Bad Request\"): is the rendezvous address right?"
        );
        assert!(refused(&with, "id 5c5c").ends_with("answered with a damaged NCCL id"));
    }
}
