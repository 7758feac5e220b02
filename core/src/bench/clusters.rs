//! The `/clusters_info` reply: the server's records of cloud-allocated node clusters.

use super::error::Error;
use super::reply::{member, object, required, FromReply};
use super::timestamp::Timestamp;
use crate::json::{Array, Elements, JsonStr, Value};

/// The `/clusters_info` reply, sorted by the server by `timestamp`, then `id`.
/// Every record is checked when the reply is read, so iterating cannot fail later.
///
/// ```
/// use benchlink_core::bench::{read_reply, ClusterState, Clusters};
/// let body = br#"[{"bench_id":24,"hosts":["127.0.0.1"],"id":1,"n":2,"provider":"mzb_dummycloud_plugin","state":"allocated","timestamp":1479139259}]"#;
/// let clusters: Clusters = read_reply(200, body).unwrap();
/// let c = clusters.iter().next().unwrap();
/// assert_eq!((c.id, c.state, c.n, c.bench_id), (1, Some(ClusterState::Allocated), Some(2), Some(24)));
/// assert!(c.hosts.unwrap().iter().eq(["127.0.0.1"]));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Clusters<'a> {
    list: Array<'a>,
}

impl<'a> Clusters<'a> {
    /// The cluster records in body order.
    ///
    /// ```
    /// use benchlink_core::bench::{read_reply, Clusters};
    /// let c: Clusters = read_reply(200, br#"[{"id":0,"state":"registered"},{"id":1}]"#).unwrap();
    /// assert!(c.iter().map(|c| c.id).eq([0, 1]));
    /// ```
    pub fn iter(&self) -> ClustersIter<'a> {
        ClustersIter {
            elements: self.list.elements(),
        }
    }

    /// True when the server has no cluster records.
    ///
    /// ```
    /// use benchlink_core::bench::{read_reply, Clusters};
    /// assert!(read_reply::<Clusters>(200, b"[]").unwrap().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

impl<'a> FromReply<'a> for Clusters<'a> {
    fn from_value(value: Value<'a>) -> Result<Self, Error<'a>> {
        let list = value.as_array().ok_or(Error::UnexpectedReply {
            expected: "an array of clusters",
        })?;
        list.elements()
            .try_for_each(|v| Cluster::from_value(v).map(|_| ()))?;
        Ok(Clusters { list })
    }
}

impl<'a> IntoIterator for &Clusters<'a> {
    type Item = Cluster<'a>;
    type IntoIter = ClustersIter<'a>;

    fn into_iter(self) -> ClustersIter<'a> {
        self.iter()
    }
}

/// Iterator over [`Clusters`]; see [`Clusters::iter`].
#[derive(Debug, Clone)]
pub struct ClustersIter<'a> {
    elements: Elements<'a>,
}

impl<'a> Iterator for ClustersIter<'a> {
    type Item = Cluster<'a>;

    fn next(&mut self) -> Option<Cluster<'a>> {
        // Every element was checked by `Clusters::from_value`, so nothing is skipped here.
        self.elements.find_map(|v| Cluster::from_value(v).ok())
    }
}

text_enum! {
    /// A cluster record's `state`. Successfully deallocated clusters are deleted, so
    /// there is no "deallocated" state.
    ClusterState in "bench" (example "allocated" => Allocated) {
        /// Allocation in progress; no `hosts` yet.
        Registered = "registered",
        /// Hosts available in `hosts`.
        Allocated = "allocated",
        /// Allocation failed; see `reason`.
        AllocationFailed = "allocation_failed",
        /// Deallocation failed; see `reason`.
        DeallocationFailed = "deallocation_failed",
    }
}

/// One cluster record. The server emits each key only "when present", so everything
/// but the id (the record's identity, needed to deallocate it) is optional.
///
/// ```
/// use benchlink_core::bench::{read_reply, ClusterState, Clusters};
/// let body = br#"[{"bench_id":3,"id":0,"n":3,"provider":"mzb_api_ec2_plugin","reason":"{error,quota}","state":"allocation_failed","timestamp":0}]"#;
/// let c = read_reply::<Clusters>(200, body).unwrap().iter().next().unwrap();
/// assert_eq!(c.state, Some(ClusterState::AllocationFailed));
/// assert!(c.reason.is_some_and(|r| r == "{error,quota}") && c.hosts.is_none());
/// assert_eq!(c.timestamp.map(|t| t.unix_seconds()), Some(0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Cluster<'a> {
    /// The cluster id (what `/deallocate_cluster` and `/remove_cluster_info` take).
    pub id: u64,
    /// Where the cluster is in its lifecycle.
    pub state: Option<ClusterState<'a>>,
    /// Hosts requested: the benchmark's nodes plus one director.
    pub n: Option<u64>,
    /// The benchmark the cluster was allocated for.
    pub bench_id: Option<u64>,
    /// Time of the last state change (integer Unix seconds on the wire).
    pub timestamp: Option<Timestamp>,
    /// The allocation plugin, e.g. `mzb_dummycloud_plugin`.
    pub provider: Option<JsonStr<'a>>,
    /// Host names or addresses, once allocated.
    pub hosts: Option<Hosts<'a>>,
    /// The Erlang rendering of the error, in the failure states.
    pub reason: Option<JsonStr<'a>>,
}

impl<'a> Cluster<'a> {
    fn from_value(value: Value<'a>) -> Result<Self, Error<'a>> {
        let obj = object(value, "each cluster as an object")?;
        let hosts = member(
            obj,
            "hosts",
            "`hosts` of a cluster as an array of strings",
            |v| {
                let list = v.as_array()?;
                list.elements()
                    .all(|h| h.as_str().is_some())
                    .then_some(Hosts { list })
            },
        )?;
        Ok(Cluster {
            id: required(
                obj,
                "id",
                "`id` of each cluster as an unsigned integer",
                |v| v.as_u64(),
            )?,
            state: member(obj, "state", "`state` of a cluster as a string", |v| {
                v.as_str().map(ClusterState::from_json)
            })?,
            n: member(obj, "n", "`n` of a cluster as an unsigned integer", |v| {
                v.as_u64()
            })?,
            bench_id: member(
                obj,
                "bench_id",
                "`bench_id` of a cluster as an unsigned integer",
                |v| v.as_u64(),
            )?,
            timestamp: member(
                obj,
                "timestamp",
                "`timestamp` of a cluster as Unix seconds",
                |v| v.as_u64().map(Timestamp::from_unix_seconds),
            )?,
            provider: member(
                obj,
                "provider",
                "`provider` of a cluster as a string",
                |v| v.as_str(),
            )?,
            hosts,
            reason: member(obj, "reason", "`reason` of a cluster as a string", |v| {
                v.as_str()
            })?,
        })
    }
}

/// A cluster's host list (checked to hold only strings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Hosts<'a> {
    list: Array<'a>,
}

impl<'a> Hosts<'a> {
    /// The host names or addresses, in order.
    ///
    /// ```
    /// use benchlink_core::bench::{read_reply, Clusters};
    /// let c: Clusters = read_reply(200, br#"[{"id":1,"hosts":["h1","h2"]}]"#).unwrap();
    /// assert_eq!(c.iter().next().unwrap().hosts.unwrap().iter().count(), 2);
    /// ```
    pub fn iter(&self) -> HostsIter<'a> {
        HostsIter {
            elements: self.list.elements(),
        }
    }
}

impl<'a> IntoIterator for Hosts<'a> {
    type Item = JsonStr<'a>;
    type IntoIter = HostsIter<'a>;

    fn into_iter(self) -> HostsIter<'a> {
        self.iter()
    }
}

/// Iterator over [`Hosts`].
#[derive(Debug, Clone)]
pub struct HostsIter<'a> {
    elements: Elements<'a>,
}

impl<'a> Iterator for HostsIter<'a> {
    type Item = JsonStr<'a>;

    fn next(&mut self) -> Option<JsonStr<'a>> {
        self.elements.find_map(|v| v.as_str())
    }
}
