//! A point measured over several rounds: its medians, and its ratios against another point
//! formed round by round (each round's point against the same round's baseline, measured
//! within minutes of it), as a median with the range of the rounds.

use crate::sweep::{Outcome, Point};
use crate::Transport;

/// A median and the least and greatest of the values it is the median of.
#[derive(Debug, Clone, Copy)]
pub struct Spread {
    /// The median.
    pub median: f64,
    /// The least value.
    pub lo: f64,
    /// The greatest value.
    pub hi: f64,
}

impl Spread {
    /// The spread of `values` (`None` when there are none that are numbers).
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Spread> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let median = if v.len() % 2 == 1 {
            v[v.len() / 2]
        } else {
            (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
        };
        Some(Spread {
            median,
            lo: v[0],
            hi: v[v.len() - 1],
        })
    }
}

/// One number of connections over one transport, every round.
#[derive(Debug, Clone)]
pub struct Rounds {
    /// Connections.
    pub connections: usize,
    /// The outcome of each round, in order.
    pub rounds: Vec<Outcome>,
}

/// What became of a point over all its rounds.
pub enum Status<'a> {
    /// Measured in at least one round, and never stopped or failed.
    Measured,
    /// Skipped in every round: the first round's reason.
    Skipped(&'a str),
    /// libtirpc stopped serving in a round: what happened.
    Stopped(&'a str),
    /// A round failed: what happened.
    Failed(&'a str),
}

impl Rounds {
    /// The first round that stopped or failed.
    pub fn ended(&self) -> Option<&Outcome> {
        self.rounds
            .iter()
            .find(|o| matches!(o, Outcome::Stopped(_) | Outcome::Failed(_)))
    }

    /// What became of the point.
    pub fn status(&self) -> Status<'_> {
        match self.ended() {
            Some(Outcome::Failed(why)) => return Status::Failed(why),
            Some(Outcome::Stopped(why)) => return Status::Stopped(why),
            _ => {}
        }
        if !self.measured().is_empty() {
            return Status::Measured;
        }
        match self.rounds.first() {
            Some(Outcome::Skipped(why)) => Status::Skipped(why),
            _ => Status::Skipped("not run"),
        }
    }

    /// The rounds that measured it.
    pub fn measured(&self) -> Vec<&Point> {
        self.rounds
            .iter()
            .filter_map(|o| match o {
                Outcome::Measured(p) => Some(&**p),
                _ => None,
            })
            .collect()
    }

    /// The median of `value` over the measured rounds (NaN without any).
    pub fn median(&self, value: impl Fn(&Point) -> f64) -> f64 {
        Spread::of(self.measured().into_iter().map(value)).map_or(f64::NAN, |s| s.median)
    }

    /// The median of `value` where it is known (`None` where it never is).
    pub fn median_of(&self, value: impl Fn(&Point) -> Option<f64>) -> Option<f64> {
        Spread::of(self.measured().into_iter().filter_map(value)).map(|s| s.median)
    }

    /// `value` over the measured rounds.
    pub fn spread(&self, value: impl Fn(&Point) -> f64) -> Option<Spread> {
        Spread::of(self.measured().into_iter().map(value))
    }
}

/// One transport's points.
#[derive(Debug, Clone)]
pub struct Run {
    /// The transport.
    pub transport: Transport,
    /// Every point, in the sweep's order of connections.
    pub points: Vec<Rounds>,
}

impl Run {
    /// The point with `n` connections, if it was measured.
    pub fn point(&self, n: usize) -> Option<&Rounds> {
        self.points
            .iter()
            .find(|p| p.connections == n && matches!(p.status(), Status::Measured))
    }

    /// The measured points.
    pub fn measured(&self) -> impl Iterator<Item = &Rounds> {
        self.points
            .iter()
            .filter(|p| matches!(p.status(), Status::Measured))
    }

    /// The largest number of connections measured so far, one of its rounds.
    pub fn largest_measured(&self) -> Option<&Point> {
        self.points
            .iter()
            .rev()
            .find_map(|p| p.measured().into_iter().next())
    }

    /// `value` at `n` connections over `value` at `base` connections, round by round (the
    /// rounds where both were measured).
    pub fn ratio(&self, n: usize, base: usize, value: impl Fn(&Point) -> f64) -> Option<Spread> {
        let (at, of) = (self.point(n)?, self.point(base)?);
        Spread::of(
            at.rounds
                .iter()
                .zip(&of.rounds)
                .filter_map(|pair| match pair {
                    (Outcome::Measured(a), Outcome::Measured(b)) => Some(value(a) / value(b)),
                    _ => None,
                }),
        )
    }
}
