//! What a process holds and has used, read from `/proc/<pid>` by the coordinator (so that
//! libtirpc's server, which cannot answer, is measured the same way as ours), and the
//! machine's limits a point must fit in.

use std::io;
use std::path::PathBuf;

/// What a process holds at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub struct Footprint {
    /// Resident memory (`VmRSS`), bytes.
    pub rss: u64,
    /// Private data and stack mappings (`VmData`), bytes: the heap and every anonymous
    /// mapping, touched or not (registered memory is mapped on its own, outside the heap).
    pub data: u64,
    /// Open descriptors.
    pub fds: u64,
    /// Of those, timers (`anon_inode:[timerfd]`).
    pub timerfds: u64,
    /// Memory mappings (lines of `maps`); Linux allows `vm.max_map_count` of them.
    pub maps: u64,
}

fn proc_path(pid: u32, file: &str) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/{file}"))
}

/// A `kB` field of `/proc/<pid>/status`, in bytes.
fn status_field(status: &str, field: &str) -> io::Result<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib << 10)
        .ok_or_else(|| io::Error::other(format!("no {field} in /proc/<pid>/status")))
}

impl Footprint {
    /// Process `pid`'s footprint now.
    pub fn of(pid: u32) -> io::Result<Footprint> {
        let status = std::fs::read_to_string(proc_path(pid, "status"))?;
        let mut fds = 0;
        let mut timerfds = 0;
        for entry in std::fs::read_dir(proc_path(pid, "fd"))? {
            // A descriptor closed between the listing and the look is simply not counted.
            let Ok(entry) = entry else { continue };
            fds += 1;
            if std::fs::read_link(entry.path())
                .is_ok_and(|target| target.as_os_str() == "anon_inode:[timerfd]")
            {
                timerfds += 1;
            }
        }
        let maps = std::fs::read_to_string(proc_path(pid, "maps"))?
            .lines()
            .count() as u64;
        Ok(Footprint {
            rss: status_field(&status, "VmRSS:")?,
            data: status_field(&status, "VmData:")?,
            fds,
            timerfds,
            maps,
        })
    }
}

/// CPU time process `pid` has used, user and system, all its threads (the counters
/// `getrusage` reads), in seconds.
pub fn cpu_seconds(pid: u32) -> io::Result<f64> {
    let stat = std::fs::read_to_string(proc_path(pid, "stat"))?;
    // The command name (field 2) may hold spaces; the fields after its ')' are plain.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| io::Error::other("malformed /proc/<pid>/stat"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    let ticks = |i: usize| -> io::Result<u64> {
        fields
            .get(i)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| io::Error::other("no utime/stime in /proc/<pid>/stat"))
    };
    // SAFETY: sysconf only reads a configuration value.
    let per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if per_s <= 0 {
        return Err(io::Error::other("sysconf(_SC_CLK_TCK) failed"));
    }
    Ok((ticks(11)? + ticks(12)?) as f64 / per_s as f64)
}

/// The open-descriptor limit before and after raising its soft value to the hard one for
/// this process (and the processes it starts, which inherit it): nothing on the machine
/// changes.
pub fn raise_nofile() -> io::Result<(u64, u64)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let before = limit.rlim_cur;
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: setrlimit reads the struct it is given.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok((before, limit.rlim_cur))
}

/// Memory the kernel says is available for new allocations (`MemAvailable`), bytes.
pub fn mem_available() -> io::Result<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo")?;
    status_field(&meminfo, "MemAvailable:")
}

/// How many local ports Linux hands out to outgoing connections
/// (`net.ipv4.ip_local_port_range`): every client connection to the one server address
/// takes one.
pub fn local_ports() -> io::Result<u64> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")?;
    let ends: Vec<u64> = range
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    match ends[..] {
        [low, high] if high >= low => Ok(high - low + 1),
        _ => Err(io::Error::other(format!(
            "unexpected ip_local_port_range {range:?}"
        ))),
    }
}

/// The most memory mappings a process may have (`vm.max_map_count`).
pub fn max_map_count() -> io::Result<u64> {
    std::fs::read_to_string("/proc/sys/vm/max_map_count")?
        .trim()
        .parse()
        .map_err(io::Error::other)
}

/// The CPUs this process may run on.
pub fn cpus() -> io::Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is an empty set; sched_getaffinity fills the one it is given.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above, with the set's true size.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0
    {
        return Err(io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE, the set's capacity.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// Restricts this process (the calling thread and every thread it starts afterwards) to
/// `cpus`.
pub fn pin_self(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is an empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::other(format!("no CPU {cpu}")));
        }
        // SAFETY: `cpu` is below CPU_SETSIZE.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: sched_setaffinity reads the set it is given.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Restricts every thread of process `pid` to `cpus` (`taskset -a -p`): for libtirpc's
/// server, which this binary does not start in a role of its own.
pub fn pin_process(pid: u32, cpus: &[usize]) -> io::Result<()> {
    let list: Vec<String> = cpus.iter().map(usize::to_string).collect();
    let status = std::process::Command::new("taskset")
        .args(["-a", "-p", "-c", &list.join(","), &pid.to_string()])
        .stdout(std::process::Stdio::null())
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "taskset on process {pid}: {status}"
        )))
    }
}
