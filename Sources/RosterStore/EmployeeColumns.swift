public import RosterDomain

/// The columns behind each employee field, in the fixed order both SQL backends select and
/// decode them (`e` is the employees table, `t` the thumbnails).
package enum EmployeeColumns {
  package static let selected: [(EmployeeFields, String)] = [
    (.guid, "e.guid"),
    (.name, "e.name"),
    (.department, "e.department"),
    (.email, "e.email"),
    (.phone, "e.phone"),
    (.address, "e.address"),
    (.about, "e.about"),
    (.active, "e.active"),
    (.startDate, "e.start_date"),
    (.vacationDays, "e.vacation_days"),
    (.pictureEtag, "e.picture_etag"),
    (.salesCount, "e.sales_count"),
    (.updateTime, "e.update_time"),
    (.thumbnail, "t.data"),
  ]
}
